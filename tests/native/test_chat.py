"""`llamay chat` driven as a person drives it: its input a pseudo-terminal (so it prompts), Ctrl-C sent as
SIGINT. Ctrl-C during a reply stops the reply and the session goes on with the shown part of the reply in the
conversation (checked against the engine run in this process on the same turns); Ctrl-C at the prompt, a second
Ctrl-C, and Ctrl-D leave."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import termios
import threading
import time

import pytest

from llamay.engine import Engine
from llamay.model import load_model
from llamay.sampling import SamplerConfig
from tests import paths

pytestmark = [pytest.mark.native_only, pytest.mark.slow]

MODEL = paths.stories("f32")
MAX_TOKENS = 24
ARGS = ["-m", str(MODEL), "--temp", "0", "-n", str(MAX_TOKENS), "--backend", "portable"]  # portable: no JIT wait
PROMPT = "> "
WAIT = 300.0  # seconds for any one step on a busy machine


class Chat:
    """`llamay chat ARGS` with a pseudo-terminal as its input; stdout and stderr gathered as they come."""

    def __init__(self) -> None:
        self.master, slave = pty.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[3] &= ~termios.ECHO  # what we type is not echoed back into the terminal
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        cmd = [sys.executable, "-m", "llamay.native.cli", "chat", *ARGS]
        self.proc = subprocess.Popen(cmd, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(slave)
        self.out, self.err = bytearray(), bytearray()
        for stream, buf in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._gather, args=(stream, buf), daemon=True).start()

    @staticmethod
    def _gather(stream, buf: bytearray) -> None:
        while chunk := stream.read1(4096):
            buf.extend(chunk)

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def wait_for(self, cond, what: str) -> None:
        deadline = time.monotonic() + WAIT
        while not cond():
            if self.proc.poll() is not None:
                time.sleep(0.2)  # the last output
                if cond():
                    return
                pytest.fail(f"llamay chat exited ({self.proc.returncode}) waiting for {what}: {self.err.decode()}")
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}: out {self.out.decode()!r} err {self.err.decode()!r}")
            time.sleep(0.02)

    def prompts(self) -> int:
        return self.err.decode().count(PROMPT)

    def ctrl_c(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self.master)


@pytest.fixture
def chat():
    c = Chat()
    c.wait_for(lambda: c.prompts() == 1, "the first prompt")
    yield c
    c.close()


def engine_turns(first: str, shown: str, second: str) -> tuple[str, str]:
    """What the engine answers `second` after `first` was answered with `shown` (its reply stopped there), and
    what it answers `second` when the stopped reply is dropped from the conversation instead."""
    cfg = SamplerConfig(0.0, 40, 0.95, 0.05, None)
    with load_model(MODEL, "portable") as model:
        engine = Engine(model)
        turn = [{"role": "user", "content": first}]
        pieces, text = engine.chat(turn, MAX_TOKENS, cfg), ""
        for piece in pieces:
            text += piece
            if len(text) >= len(shown):
                break
        pieces.close()
        assert text == shown, "the shown reply is not the start of the engine's reply"
        turn += [{"role": "assistant", "content": shown}, {"role": "user", "content": second}]
        kept = "".join(engine.chat(turn, MAX_TOKENS, cfg))
        dropped = "".join(Engine(model).chat([turn[0], turn[2]], MAX_TOKENS, cfg))
    return kept, dropped


def test_ctrl_c_stops_the_reply_and_keeps_the_conversation(chat):
    chat.type("Once upon a time\n")
    chat.wait_for(lambda: len(chat.out) >= 12, "the reply to stream")
    chat.ctrl_c()
    # stdout and stderr are read by two threads: wait for both
    chat.wait_for(lambda: chat.prompts() == 2 and chat.out.endswith(b"\n"), "the prompt after the stopped reply")
    assert chat.proc.poll() is None, "Ctrl-C ended the session"
    assert "[stopped: the reply so far stays in the conversation]" in chat.err.decode()
    shown = chat.out.decode()
    assert shown.endswith("\n")
    shown = shown[:-1]
    chat.type("Lily\n")
    chat.wait_for(lambda: chat.prompts() == 3 and chat.out.endswith(b"\n"), "the second reply")
    second = chat.out.decode()[len(shown) + 1 :]
    chat.type("\x04")  # Ctrl-D at the prompt: leave
    assert chat.proc.wait(timeout=WAIT) == 0
    assert "Traceback" not in chat.err.decode()
    kept, dropped = engine_turns("Once upon a time", shown, "Lily")
    assert second == kept + "\n"
    assert kept != dropped  # the comparison can tell a kept reply from a dropped one


def test_ctrl_c_at_the_prompt_leaves(chat):
    chat.ctrl_c()
    assert chat.proc.wait(timeout=WAIT) == 130
    assert "Traceback" not in chat.err.decode()


def test_a_second_ctrl_c_leaves(chat):
    chat.type("Once upon a time\n")
    chat.wait_for(lambda: len(chat.out) >= 1, "the reply to stream")
    chat.ctrl_c()
    time.sleep(0.05)
    chat.ctrl_c()  # before the reply stops, or at the prompt after it: either way the session ends
    assert chat.proc.wait(timeout=WAIT) == 130
    assert "Traceback" not in chat.err.decode()


def test_ctrl_d_leaves(chat):
    chat.type("\x04")
    assert chat.proc.wait(timeout=WAIT) == 0
    assert chat.out == b""
