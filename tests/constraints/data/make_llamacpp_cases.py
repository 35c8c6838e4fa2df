"""Re-express llama.cpp's grammar test cases as data (run by hand; the JSON files it writes are committed).

    python tests/constraints/data/make_llamacpp_cases.py LLAMA_CPP_CHECKOUT

Reads `tests/test-grammar-integration.cpp` (GBNF strings or JSON schemas with strings that must pass and must
fail) and `tests/test-json-schema-to-grammar.cpp` (schemas with the grammar llama.cpp's converter writes, or
an expected failure) and writes `llamacpp_grammar_integration.json` and `llamacpp_json_schema_to_grammar.json`
beside this script. Only the cases (facts) carry over; the C++ code does not. llama.cpp is MIT-licensed.
The files here were made from llama.cpp commit 1eeb523c3e0c7ffbd59469f5463dcbdecba3535e (2025-09-21).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


class _Source:
    """A cursor over C++ source that reads string literals (raw or escaped) and skips comments."""

    def __init__(self, text: str, pos: int = 0) -> None:
        self.text, self.pos = text, pos

    def skip(self) -> None:
        while True:
            m = re.compile(r"\s+|//[^\n]*").match(self.text, self.pos)
            if not m or m.end() == self.pos:
                return
            self.pos = m.end()

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos]

    def expect(self, s: str) -> None:
        self.skip()
        if not self.text.startswith(s, self.pos):
            raise ValueError(f"expected {s!r} at {self.text[self.pos : self.pos + 40]!r}")
        self.pos += len(s)

    def string(self) -> str:
        """One literal, or several adjacent ones concatenated."""
        parts = [self._one()]
        while self.peek() == '"' or self.text.startswith('R"', self.pos):
            parts.append(self._one())
        return "".join(parts)

    def _one(self) -> str:
        self.skip()
        if self.text.startswith('R"', self.pos):
            m = re.compile(r'R"([^(]*)\(').match(self.text, self.pos)
            delim = ")" + m.group(1) + '"'
            end = self.text.index(delim, m.end())
            self.pos = end + len(delim)
            return self.text[m.end() : end]
        self.expect('"')
        out = []
        while self.text[self.pos] != '"':
            c = self.text[self.pos]
            if c == "\\":
                e = self.text[self.pos + 1]
                out.append(_C_ESCAPES[e])
                self.pos += 2
            else:
                out.append(c)
                self.pos += 1
        self.pos += 1
        return "".join(out)

    def string_list(self) -> list[str]:
        self.expect("{")
        items = []
        while self.peek() != "}":
            items.append(self.string())
            if self.peek() == ",":
                self.expect(",")
        self.expect("}")
        return items


def integration_cases(text: str) -> list[dict]:
    cases = []
    for m in re.finditer(r"(?<!void )\b(test_grammar|test_schema)\(", text):
        src = _Source(text, m.end())
        desc = src.string()
        src.expect(",")
        body = src.string()
        src.expect(",")
        passing = src.string_list()
        src.expect(",")
        failing = src.string_list()
        kind = "gbnf" if m.group(1) == "test_grammar" else "schema"
        case = {"name": desc, kind: body if kind == "gbnf" else json.loads(body)}
        cases.append({**case, "pass": passing, "fail": failing})
    return cases


def schema_to_grammar_cases(text: str) -> list[dict]:
    cases = []
    for m in re.finditer(r"test\(\{\s*(SUCCESS|FAILURE),", text):
        src = _Source(text, m.end())
        name = src.string()
        src.expect(",")
        schema = src.string()
        src.expect(",")
        grammar = src.string()
        cases.append(
            {
                "name": name,
                "status": m.group(1).lower(),
                "schema": json.loads(schema),
                "llamacpp_grammar": "\n".join(line.strip() for line in grammar.strip().splitlines()),
            }
        )
    return cases


def main(checkout: str) -> None:
    root = Path(checkout)
    integ = integration_cases((root / "tests/test-grammar-integration.cpp").read_text())
    # the cases main() runs outside test_grammar/test_schema: grammars that must not build
    build_failures = [
        {"name": "missing root", "gbnf": 'rot ::= expr\nexpr ::= term ("+" term)*\nterm ::= number\nnumber ::= [0-9]+'},
        {
            "name": "missing reference",
            "gbnf": 'root ::= expr\nexpr ::= term ("+" term)*\nterm ::= numero\nnumber ::= [0-9]+',
        },
        {"name": "left recursion (simple)", "gbnf": 'root ::= "a" | root "a"'},
        {"name": "left recursion (medium)", "gbnf": 'root ::= asdf\nasdf ::= "a" | asdf "a"'},
        {
            "name": "left recursion (hard)",
            "gbnf": 'root ::= asdf\nasdf ::= "a" | foo "b"\nfoo ::= "c" | asdf "d" | "e"',
        },
        {
            "name": "left recursion (hardest, through an empty rule)",
            "gbnf": 'root ::= asdf\nasdf ::= "a" | foo "b"\nfoo ::= "c" | empty asdf "d" | "e"\nempty ::= "blah" | ',
        },
    ]
    out = {"source": "llama.cpp tests/test-grammar-integration.cpp (MIT)", "cases": integ,
           "build_failures": build_failures}  # fmt: skip
    (HERE / "llamacpp_grammar_integration.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    s2g = schema_to_grammar_cases((root / "tests/test-json-schema-to-grammar.cpp").read_text())
    out = {"source": "llama.cpp tests/test-json-schema-to-grammar.cpp (MIT)", "cases": s2g}
    (HERE / "llamacpp_json_schema_to_grammar.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(integ)} integration cases, {len(build_failures)} build failures, {len(s2g)} schema cases")


if __name__ == "__main__":
    main(sys.argv[1])
