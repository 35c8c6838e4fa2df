"""A reply's reasoning split from its answer, for templates that reason in `<think>...</think>` (Qwen3,
DeepSeek-R1 and their kin): Ollama's `think` and `message.thinking`.

The model writes `<think>` itself, or the template's generation prompt opened it (the prompt ends with it);
everything up to `</think>` is the reasoning, the rest the answer. A stream is split as it comes: a piece that
may be the start of a tag is held back until the next piece tells."""

from __future__ import annotations

OPEN, CLOSE = "<think>", "</think>"


def reasons(template_source: str | None) -> bool:
    """The template knows a reasoning block (it writes or strips `<think>`, or takes `enable_thinking`)."""
    source = template_source or ""
    return OPEN in source or "enable_thinking" in source


class ThinkSplit:
    """Feed a reply's text piece by piece; each feed gives (reasoning, answer) text that is now certain."""

    def __init__(self, opened: bool = False) -> None:
        self.state = "thinking" if opened else "start"  # start: nothing but white space yet
        self.held = ""

    def feed(self, text: str, final: bool = False) -> tuple[str, str]:
        self.held += text
        thinking, answer = "", ""
        while True:
            if self.state == "start":
                stripped = self.held.lstrip()
                if stripped.startswith(OPEN):
                    self.held, self.state = stripped[len(OPEN) :], "thinking"
                    continue
                if OPEN.startswith(stripped) and not final:  # maybe the tag, not all here yet
                    return thinking, answer
                self.state = "answer"
                continue
            if self.state == "thinking":
                at = self.held.find(CLOSE)
                if at >= 0:
                    thinking += self.held[:at]
                    self.held, self.state = self.held[at + len(CLOSE) :].lstrip("\n"), "after"
                    continue
                keep = 0 if final else _partial(self.held, CLOSE)
                thinking += self.held[: len(self.held) - keep]
                self.held = self.held[len(self.held) - keep :]
                return thinking, answer
            if self.state == "after":  # the answer, its leading newlines dropped
                self.held = self.held.lstrip("\n")
                if not self.held and not final:
                    return thinking, answer
                self.state = "answer"
            answer += self.held
            self.held = ""
            return thinking, answer


def _partial(text: str, tag: str) -> int:
    """Length of the longest end of `text` that is a start of `tag` (held back: the tag may be arriving)."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


def split(text: str, opened: bool = False) -> tuple[str, str]:
    """(reasoning, answer) of a whole reply."""
    return ThinkSplit(opened).feed(text, final=True)
