"""`llamay chat -m MODEL`: an interactive chat with the model's own template, streaming replies.

Each turn reuses the KV cache of the conversation so far: only the new message is computed.
Commands: /reset forgets the conversation, /exit (or end of input) leaves.
"""

from __future__ import annotations

import argparse
import sys


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
            print(f"llamay chat: {model.name} ({model.backend.name}); /reset, /exit", file=sys.stderr)
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
            reply = []
            for piece in engine.chat(messages, args.max_tokens, sampling):
                reply.append(piece)
                sys.stdout.write(piece)
                sys.stdout.flush()
            sys.stdout.write("\n")
            messages.append({"role": "assistant", "content": "".join(reply)})
