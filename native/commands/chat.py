"""`llamay chat -m MODEL`: an interactive chat with the model's own template, streaming replies.

Each turn reuses the KV cache of the conversation so far: only the new message is computed.
Commands: /reset forgets the conversation, /exit (or end of input, Ctrl-D) leaves.

Ctrl-C while a reply streams stops that reply at the next piece of text and keeps the conversation, as
llama.cpp's CLI does; a second Ctrl-C before it stops, or a Ctrl-C at the prompt, leaves. The part of the reply
already shown stays in the conversation as the assistant's turn: the model then sees what the person saw (and
its KV cache already holds it), and turns keep alternating, which many chat templates require. A reply stopped
before any text came drops its message too, so the conversation is as it was before the turn.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="chat interactively with a model, using its chat template")
    p.add_argument("-m", "--model", help="GGUF file or catalogue name (default: the default model)")
    p.add_argument("-s", "--system", help="system prompt")
    p.add_argument("-n", "--max-tokens", type=int, default=512)
    p.add_argument("--temp", type=float, default=0.7)
    p.add_argument("--top-k", type=int, default=40)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--min-p", type=float, default=0.05)
    p.add_argument("--seed", type=int)
    p.add_argument("-c", "--ctx-size", type=int, help="context size (default: min(train context, 4096))")
    p.add_argument("--backend", help="kernel backend (portable, numba, wasm)")
    p.set_defaults(func=run)


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@contextmanager
def first_ctrl_c_stops() -> Iterator[Callable[[], bool]]:
    """Within the block, a first Ctrl-C only raises a flag (read by the function yielded); a second raises
    KeyboardInterrupt. Kernels are never interrupted mid-step: the reply stops where the caller looks."""
    pressed: list[int] = []

    def on_sigint(_signum: int, _frame) -> None:
        if pressed:
            raise KeyboardInterrupt
        pressed.append(1)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield lambda: bool(pressed)
    finally:
        signal.signal(signal.SIGINT, previous)


def reply(pieces: Generator[str, None, None], out=None) -> tuple[str, bool]:
    """Stream `pieces` to `out` (stdout) until they end or Ctrl-C; (the text shown, whether Ctrl-C stopped it)."""
    out = out or sys.stdout
    shown: list[str] = []
    with first_ctrl_c_stops() as stopped:
        try:
            for piece in pieces:
                if stopped():
                    break
                shown.append(piece)
                out.write(piece)
                out.flush()
        finally:
            pieces.close()  # the engine leaves its state where the reply stopped
        interrupted = stopped()
    out.write("\n")
    out.flush()
    return "".join(shown), interrupted


def run(args: argparse.Namespace) -> int:
    from llamay.engine import Engine
    from llamay.model import load_model
    from llamay.native.store import resolve_model
    from llamay.sampling import SamplerConfig

    path = resolve_model(args.model, log=lambda m: print(m, file=sys.stderr))
    sampling = SamplerConfig(args.temp, args.top_k, args.top_p, args.min_p, args.seed)
    interactive = sys.stdin.isatty()
    with load_model(path, args.backend) as model:
        engine = Engine(model, n_ctx=args.ctx_size)
        system = [{"role": "system", "content": args.system}] if args.system else []
        messages = list(system)
        if interactive:
            say(f"llamay chat: {model.name} ({model.backend.name}); /reset, /exit; Ctrl-C stops a reply")
        try:
            while True:
                if interactive:
                    print("> ", end="", file=sys.stderr, flush=True)
                line = sys.stdin.readline()
                if not line or line.strip() == "/exit":
                    return 0
                if line.strip() == "/reset":
                    messages = list(system)
                    continue
                if not line.strip():
                    continue
                messages.append({"role": "user", "content": line.rstrip("\n")})
                text, stopped = reply(engine.chat(messages, args.max_tokens, sampling))
                if stopped and not text:
                    messages.pop()
                    say("[stopped before the reply began: the message is dropped]")
                    continue
                messages.append({"role": "assistant", "content": text})
                if stopped:
                    say("[stopped: the reply so far stays in the conversation]")
        except KeyboardInterrupt:  # at the prompt, or a second Ctrl-C during a reply
            say("")
            return 130
