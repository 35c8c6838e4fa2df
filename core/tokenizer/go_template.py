"""Go's text/template syntax (what Ollama's TEMPLATE layers are written in), parsed to a small tree.

The lexer follows text/template/parse: text between `{{ }}` actions, trim markers (`{{- ` and ` -}}` remove the
white space on that side of the action, newlines included), comments `{{/* */}}`, pipelines of commands joined
by `|`, variable declarations (`$x := ...`) and assignments (`$x = ...`), fields (`.A.B`, `$x.A`, `(p).A`),
string, raw string, character, number, boolean and nil literals. Control actions: if / else if / else, range
(with an else), with (and else with), break, continue, end. `define`, `template` and `block` parse as errors
naming them: templates that call other templates are not translated (see ollama_template.py).

The tree mirrors Go's parse.Tree closely enough that Ollama's own rewrites (cut after `.Response`) apply to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import LlamayError

SPACE = " \t\r\n"
LEFT, RIGHT = "{{", "}}"
KEYWORDS = ("if", "else", "end", "range", "with", "break", "continue", "define", "template", "block")
UNSUPPORTED = ("define", "template", "block")
ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"',
           "'": "'"}  # fmt: skip
HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class GoTemplateError(LlamayError):
    """A Go template that does not parse (as Go's text/template would refuse it), or uses what is not read here."""


class UnsupportedTemplate(GoTemplateError):
    """A valid Go template using what is not read or translated here (named in the message)."""


# --- the tree ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dot:
    pass


@dataclass(frozen=True)
class Field:
    names: tuple[str, ...]  # .A.B relative to dot


@dataclass(frozen=True)
class Var:
    name: str  # "$" or "$x"
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Literal:
    value: str | int | float | bool | None


@dataclass(frozen=True)
class Ident:
    name: str  # a function


@dataclass(frozen=True)
class Chain:
    node: Node  # (pipeline).A.B
    fields: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Pipe:
    decl: tuple[str, ...]  # variables declared or assigned
    assign: bool  # `=` (an existing variable) rather than `:=`
    cmds: tuple[Command, ...]


@dataclass(frozen=True)
class SubPipe:
    pipe: Pipe  # a parenthesised pipeline used as an operand


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Action:
    pipe: Pipe
    line: int


@dataclass(frozen=True)
class Branch:
    kind: str  # "if", "range" or "with"
    pipe: Pipe
    body: tuple[Node, ...]
    orelse: tuple[Node, ...] | None
    line: int


@dataclass(frozen=True)
class Control:
    kind: str  # "break" or "continue"
    line: int


Node = Dot | Field | Var | Literal | Ident | Chain | Command | Pipe | SubPipe | Text | Action | Branch | Control


# --- lexing ----------------------------------------------------------------------------------------------------


@dataclass
class Tok:
    kind: str  # field var ident string number bool nil dot ( ) | := = ,
    value: object
    spaced: bool  # white space came before it (separates operands; none before a field chains it)


class Lexer:
    """Splits a template into text and actions (trim markers applied), each action into tokens."""

    def __init__(self, source: str, name: str) -> None:
        self.src, self.name = source, name

    def fail(self, msg: str, at: int) -> GoTemplateError:
        line = self.src.count("\n", 0, at) + 1
        return GoTemplateError(f"{self.name}: line {line}: {msg}")

    def items(self) -> list[tuple[str, object, int]]:
        """[("text", str, pos) | ("action", [Tok], pos)] with trim markers applied to the texts."""
        out: list[tuple[str, object, int]] = []
        src, i, trim_next = self.src, 0, False
        while i <= len(src):
            j = src.find(LEFT, i)
            text = src[i:] if j < 0 else src[i:j]
            if trim_next:
                text = text.lstrip(SPACE)
            if j >= 0 and src.startswith("-", j + 2) and src[j + 3 : j + 4] in tuple(SPACE):
                text, start = text.rstrip(SPACE), j + 4
            else:
                start = j + 2
            if text:
                out.append(("text", text, i))
            if j < 0:
                break
            toks, end, trim_next = self.action(start, j)
            if toks is not None:
                out.append(("action", toks, j))
            i = end
        return out

    def action(self, i: int, opened: int) -> tuple[list[Tok] | None, int, bool]:
        """The tokens of the action starting at `i` (None for a comment), where it ends, whether it trims."""
        src = self.src
        k = i
        while k < len(src) and src[k] in SPACE:
            k += 1
        if src.startswith("/*", k):
            close = src.find("*/", k + 2)
            if close < 0:
                raise self.fail("unclosed comment", opened)
            end, trim = self.close(close + 2, opened)
            if end is None:
                raise self.fail("comment ends before the closing delimiter", opened)
            return None, end, trim
        toks: list[Tok] = []
        spaced = True
        while True:
            if i >= len(src):
                raise self.fail("unclosed action", opened)
            end, trim = self.close(i, opened)
            if end is not None:
                return toks, end, trim
            c = src[i]
            if c in SPACE:
                spaced, i = True, i + 1
                continue
            tok, i = self.token(i, spaced)
            toks.append(tok)
            spaced = False

    def close(self, i: int, opened: int) -> tuple[int | None, bool]:
        src = self.src
        if src.startswith(RIGHT, i):
            return i + 2, False
        if i < len(src) and src[i] in SPACE:
            k = i
            while k < len(src) and src[k] in SPACE:
                k += 1
            if src.startswith("-" + RIGHT, k):
                return k + 3, True
        return None, False

    def token(self, i: int, spaced: bool) -> tuple[Tok, int]:
        src = self.src
        c = src[i]
        if c == "." and not (i + 1 < len(src) and src[i + 1].isdigit()):
            j = self.word_end(i + 1)
            return (Tok("field", src[i + 1 : j], spaced) if j > i + 1 else Tok("dot", ".", spaced)), j
        if c == "$":
            j = self.word_end(i + 1)
            return Tok("var", src[i:j], spaced), j
        if c in "()|,":
            return Tok(c, c, spaced), i + 1
        if src.startswith(":=", i):
            return Tok(":=", ":=", spaced), i + 2
        if c == "=":
            return Tok("=", "=", spaced), i + 1
        if c == '"':
            value, j = self.quoted(i)
            return Tok("string", value, spaced), j
        if c == "`":
            j = src.find("`", i + 1)
            if j < 0:
                raise self.fail("unterminated raw string", i)
            return Tok("string", src[i + 1 : j], spaced), j + 1
        if c == "'":
            value, j = self.quoted(i, quote="'")
            if len(value) != 1:
                raise self.fail(f"malformed character constant {src[i:j]}", i)
            return Tok("number", ord(value), spaced), j
        if c.isdigit() or c in "+-.":
            return self.number(i, spaced)
        if c.isalpha() or c == "_":
            j = self.word_end(i)
            word = src[i:j]
            if word in ("true", "false"):
                return Tok("bool", word == "true", spaced), j
            if word == "nil":
                return Tok("nil", None, spaced), j
            return Tok("ident", word, spaced), j
        raise self.fail(f"unexpected {c!r} in action", i)

    def word_end(self, i: int) -> int:
        src = self.src
        while i < len(src) and (src[i].isalnum() or src[i] == "_"):
            i += 1
        return i

    def quoted(self, i: int, quote: str = '"') -> tuple[str, int]:
        src, out, k = self.src, [], i + 1
        while k < len(src) and src[k] != quote:
            c = src[k]
            if c == "\n":
                break
            if c != "\\":
                out.append(c)
                k += 1
                continue
            e = src[k + 1 : k + 2]
            if e in ESCAPES:
                out.append(ESCAPES[e])
                k += 2
            elif e in HEX_ESCAPES:
                digits = src[k + 2 : k + 2 + HEX_ESCAPES[e]]
                try:
                    out.append(chr(int(digits, 16)))
                except ValueError:
                    raise self.fail(f"bad escape \\{e}{digits}", k) from None
                k += 2 + HEX_ESCAPES[e]
            elif e in "01234567" and e:
                out.append(chr(int(src[k + 1 : k + 4], 8)))
                k += 4
            else:
                raise self.fail(f"unknown escape \\{e}", k)
        if k >= len(src) or src[k] != quote:
            raise self.fail("unterminated quoted string", i)
        return "".join(out), k + 1

    def number(self, i: int, spaced: bool) -> tuple[Tok, int]:
        src, j = self.src, i
        while j < len(src) and (src[j].isalnum() or src[j] in "._+-"):
            if src[j] in "+-" and j > i and src[j - 1] not in "eEpP":
                break
            j += 1
        text = src[i:j].replace("_", "")
        try:
            value: int | float = int(text, 0)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise self.fail(f"bad number syntax: {src[i:j]!r}", i) from None
        return Tok("number", value, spaced), j


# --- parsing ---------------------------------------------------------------------------------------------------


MAX_NESTING = 64  # {{if}}/{{range}}/{{with}}, {{else if}} and (...) inside each other: real templates nest ~5


class Parser:
    def __init__(self, source: str, name: str = "template") -> None:
        self.lex = Lexer(source, name)
        self.items = self.lex.items()
        self.pos = 0
        self.depth = 0  # the parser (and the evaluator after it) recurses once a level: bounded, not a crash

    @contextlib.contextmanager
    def nested(self, at: int) -> Iterator[None]:
        if self.depth >= MAX_NESTING:
            raise self.fail(f"nested more than {MAX_NESTING} levels deep (max_nesting)", at)
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def fail(self, msg: str, at: int) -> GoTemplateError:
        return self.lex.fail(msg, at)

    def parse(self) -> tuple[Node, ...]:
        body, stop = self.nodes()
        if stop is not None:
            raise self.fail(f"unexpected {{{{{stop[0]}}}}}", stop[1])
        return body

    def nodes(self) -> tuple[tuple[Node, ...], tuple[str, int, list[Tok]] | None]:
        """Nodes up to an {{end}} or {{else}} (returned as the stop: keyword, position, rest of its tokens)."""
        out: list[Node] = []
        while self.pos < len(self.items):
            kind, value, at = self.items[self.pos]
            self.pos += 1
            if kind == "text":
                out.append(Text(value))  # type: ignore[arg-type]
                continue
            toks: list[Tok] = value  # type: ignore[assignment]
            if not toks:
                raise self.fail("missing value for command", at)
            head = toks[0]
            word = head.value if head.kind == "ident" else None
            if word in ("end", "else"):
                return tuple(out), (word, at, toks[1:])
            if word in UNSUPPORTED:
                line = self.lex.src.count("\n", 0, at) + 1
                raise UnsupportedTemplate(
                    f"{self.lex.name}: line {line}: {{{{{word}}}}} (named templates) is not supported"
                )
            line = self.lex.src.count("\n", 0, at) + 1
            if word in ("break", "continue"):
                if len(toks) > 1:
                    raise self.fail(f"unexpected tokens after {word}", at)
                out.append(Control(word, line))
            elif word in ("if", "range", "with"):
                out.append(self.branch(word, toks[1:], at))
            else:
                out.append(Action(self.pipeline(toks, at), line))
        return tuple(out), None

    def branch(self, kind: str, toks: list[Tok], at: int) -> Branch:
        with self.nested(at):
            return self._branch(kind, toks, at)

    def _branch(self, kind: str, toks: list[Tok], at: int) -> Branch:
        pipe = self.pipeline(toks, at, allow_two=kind == "range")
        body, stop = self.nodes()
        line = self.lex.src.count("\n", 0, at) + 1
        if stop is None:
            raise self.fail(f"unexpected end of template: {{{{{kind}}}}} is never closed", at)
        word, where, rest = stop
        if word == "end":
            if rest:
                raise self.fail("unexpected tokens after end", where)
            return Branch(kind, pipe, body, None, line)
        if rest and rest[0].kind == "ident" and rest[0].value in ("if", "with") and kind != "range":
            # {{else if}} / {{else with}}: a branch of its own, ended by the same {{end}}
            inner = self.branch(rest[0].value, rest[1:], where)  # type: ignore[arg-type]
            return Branch(kind, pipe, body, (inner,), line)
        if rest:
            raise self.fail("unexpected tokens after else", where)
        orelse, stop = self.nodes()
        if stop is None or stop[0] != "end" or stop[2]:
            raise self.fail(f"expected {{{{end}}}} to close {{{{{kind}}}}}", where if stop is None else stop[1])
        return Branch(kind, pipe, body, orelse, line)

    def pipeline(self, toks: list[Tok], at: int, allow_two: bool = False) -> Pipe:
        decl: list[str] = []
        assign = False
        i = 0
        # a declaration: $x := ..., $x = ..., or (range) $i, $x := ...
        if toks and toks[0].kind == "var":
            if len(toks) > 1 and toks[1].kind in (":=", "="):
                decl, assign, i = [str(toks[0].value)], toks[1].kind == "=", 2
            elif (
                allow_two
                and len(toks) > 3
                and toks[1].kind == ","
                and toks[2].kind == "var"
                and toks[3].kind
                in (
                    ":=",
                    "=",
                )
            ):
                decl, assign, i = [str(toks[0].value), str(toks[2].value)], toks[3].kind == "=", 4
        cmds, i = self.commands(toks, i, at)
        if i != len(toks):
            raise self.fail(f"unexpected {toks[i].value!r} in pipeline", at)
        if not cmds:
            raise self.fail("missing value for command", at)
        return Pipe(tuple(decl), assign, tuple(cmds))

    def commands(self, toks: list[Tok], i: int, at: int) -> tuple[list[Command], int]:
        cmds: list[Command] = []
        while True:
            args: list[Node] = []
            while i < len(toks) and toks[i].kind not in ("|", ")"):
                node, i = self.operand(toks, i, at)
                args.append(node)
            if not args:
                raise self.fail("missing command in pipeline", at)
            cmds.append(Command(tuple(args)))
            if i < len(toks) and toks[i].kind == "|":
                i += 1
                continue
            return cmds, i

    def operand(self, toks: list[Tok], i: int, at: int) -> tuple[Node, int]:
        t = toks[i]
        i += 1
        node: Node
        if t.kind == "dot":
            node = Dot()
        elif t.kind == "field":
            names = [str(t.value)]
            while i < len(toks) and toks[i].kind == "field" and not toks[i].spaced:
                names.append(str(toks[i].value))
                i += 1
            return Field(tuple(names)), i
        elif t.kind == "var":
            node = Var(str(t.value))
        elif t.kind in ("string", "number", "bool", "nil"):
            node = Literal(t.value)  # type: ignore[arg-type]
        elif t.kind == "ident":
            if t.value in KEYWORDS:
                raise self.fail(f"unexpected {t.value} in operand", at)
            node = Ident(str(t.value))
        elif t.kind == "(":
            with self.nested(at):
                cmds, i = self.commands(toks, i, at)
            if i >= len(toks) or toks[i].kind != ")":
                raise self.fail("unclosed left paren", at)
            i += 1
            node = SubPipe(Pipe((), False, tuple(cmds)))
        else:
            raise self.fail(f"unexpected {t.value!r} in operand", at)
        fields = []
        while i < len(toks) and toks[i].kind == "field" and not toks[i].spaced:
            fields.append(str(toks[i].value))
            i += 1
        if fields:
            node = Var(node.name, tuple(fields)) if isinstance(node, Var) else Chain(node, tuple(fields))
        return node, i


def parse(source: str, name: str = "template") -> tuple[Node, ...]:
    """The tree of a Go template; GoTemplateError names the line of what does not parse."""
    return Parser(source, name).parse()
