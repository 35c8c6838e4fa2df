"""JSON Schema `pattern` (ECMA-262 regular expressions) to grammar nodes over code points.

Supported: literals and escapes (\\n \\t \\r \\f \\v \\0 \\xHH \\uHHHH \\u{H..} and identity escapes), `.`, classes with
ranges and negation, \\d \\D \\w \\W \\s \\S (in and out of classes; as sets true in ECMA's meaning and in
Python's, which jsonschema uses: regex_classes.py), groups `(...)` `(?:...)` `(?<name>...)`,
alternation, quantifiers `* + ? {n} {n,} {n,m}` (lazy forms too: same language), and the anchors `^` / `$` at
the start / end of a top-level alternative (or of a group that is one: `^a$|(^b$)`). Lookarounds,
backreferences and word boundaries have no grammar equivalent and are refused.

`parse_pattern(..., search=True)` is JSON Schema's meaning: the string *contains* a match, so an unanchored
start or end matches any text there (`"a"` is `.*a.*`; `"^a"` is `a.*`); without it a pattern is a
whole-string match (a subset of the strings containing one).
Limits (limits.py): groups nest at most `max_nesting` deep; a count that must be reached is at most
`max_repeat`, and an upper count beyond it is lowered to it (again a subset of the matches).
"""

from __future__ import annotations

import re

from .errors import ConstraintError
from .grammar import EMPTY, MAX_CODE_POINT, Alt, Chars, Lit, Node, Repeat, Seq, alt, seq, tree_shape
from .limits import Budget, budget_of, count_of
from .regex_classes import CLASS_ESCAPES
from .utf8 import normalize

LINE_TERMINATORS = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
# groups nested at the start of a branch tried as top-level branches, `(^a$|(^b$))`: a failed try is parsed
# again as an ordinary group, so each level tried re-reads what it holds (60 levels around 100,000 characters
# took 45 s)
_TOP_GROUPS = 3
_TRIE_DEPTH = 32  # branchings of a word list's trie at most (deeper: the words stay alternatives)
_LITERALS = re.compile(r"[^\\\[\](){}|.*+?^$]+")  # characters that stand for themselves outside a class
_CHAR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}


class _Regex:
    def __init__(self, pattern: str, where: str, budget: Budget, search: bool = False) -> None:
        self.p = pattern
        self.search = search  # an unanchored side matches anything there (ECMA's search semantics)
        self.i = 0
        self.where = where
        self.budget = budget
        self.depth = 0  # groups open at the current position
        self.ends = ("", "|")  # what may follow a `$` that ends a top-level branch
        self.anchors = 0  # anchors met at the ends of top-level branches so far
        self.tops = 0  # groups being tried as top-level branches around here (each failed try is parsed again)
        self.may_anchor = "^" in pattern or "$" in pattern  # (else no group is tried as top-level branches)

    def error(self, msg: str) -> ConstraintError:
        return ConstraintError(f"{self.where}: pattern {self.p!r}, position {self.i}: {msg}")

    def at(self) -> str:
        return f"{self.where} (pattern position {self.i})"

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def top(self) -> Node:
        options = [self.top_branch()]
        while self.peek() == "|":
            self.i += 1
            options.append(self.top_branch())
        if self.i < len(self.p):
            raise self.error(f"unexpected {self.peek()!r}")
        return alt(*options)

    def top_branch(self) -> Node:
        """A top-level branch; one that is a whole group, `(^a$|^b)`, is its group's branches at the top level
        (so their anchors are at the ends of the pattern)."""
        start, depth = self.i, self.depth
        if (
            self.peek() == "("
            and self.may_anchor
            and self.tops < _TOP_GROUPS
            and self.p[self.i : self.i + 3] not in ("(?=", "(?!")
            and not self.p.startswith("(?<=", self.i)
            and not self.p.startswith("(?<!", self.i)
        ):
            try:
                self.atom_open()
                ends, self.ends = self.ends, ("", "|", ")")
                anchors = self.anchors
                self.tops += 1
                try:
                    options = [self.top_branch()]
                    while self.peek() == "|":
                        self.i += 1
                        options.append(self.top_branch())
                finally:
                    self.ends = ends
                    self.tops -= 1
                # (a group without an anchor is an ordinary atom: its words are factored there)
                if self.peek() == ")" and self.peek(1) in ("", "|") and self.anchors > anchors:
                    self.i += 1
                    self.depth -= 1
                    return alt(*options)
            except ConstraintError:
                pass
            self.budget.charge(max(self.i - start, 1), self.where)  # (read again below)
            self.i, self.depth = start, depth
        return self.branch(top=True)

    def alternation(self) -> Node:
        options = [self.branch(top=False)]
        while self.peek() == "|":
            self.i += 1
            options.append(self.branch(top=False))
        return _factored(options)

    def branch(self, top: bool) -> Node:
        items: list[Node] = []
        start = end = not (top and self.search)  # anchored (or whole-match mode)
        if top and self.peek() == "^":
            self.i += 1
            start = True
            self.anchors += 1
        while self.peek() and self.peek() not in "|)":
            if top and self.peek() == "$" and self.peek(1) in self.ends:
                self.i += 1
                end = True
                self.anchors += 1
                break
            run = _LITERALS.match(self.p, self.i)
            if run is not None and run.end() - self.i > 1:  # (a run of plain characters: one literal, but
                stop = run.end()  # its last one alone when a quantifier follows it)
                if stop < len(self.p) and self.p[stop] in "*+?{":
                    stop -= 1
                items.append(Lit(self.p[self.i : stop]))
                self.i = stop
                continue
            atom = self.atom()
            items.append(self.quantified(atom))
        anything = Repeat(Chars(((0, MAX_CODE_POINT),)), 0, None)
        items = [*([] if start else [anything]), *items, *([] if end else [anything])]
        return seq(*items) if items else Lit("")

    def quantified(self, atom: Node) -> Node:
        stacked = 0  # quantifiers on this atom so far: each nests the tree one level deeper
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{" and (bounds := self.braces()) is not None:
                lo, hi = bounds
            else:
                return atom
            if self.peek() == "?":  # lazy: the same language
                self.i += 1
            stacked += 1
            self.budget.check("max_nesting", self.depth + stacked, self.at, "group nesting (with stacked quantifiers)")
            if hi is None and _nullable(atom):  # (a*)*: a nullable item repeated forever is left recursion
                atom, lo = _starred(atom), 0
            atom = Repeat(atom, lo, hi) if atom != EMPTY else EMPTY

    def braces(self) -> tuple[int, int | None] | None:
        j = self.p.find("}", self.i)
        body = self.p[self.i + 1 : j] if j > 0 else ""
        parts = body.split(",")
        if (
            j < 0
            or len(parts) > 2
            or not parts[0].isascii()
            or not parts[0].isdigit()
            or (len(parts) == 2 and parts[1] and not (parts[1].isascii() and parts[1].isdigit()))
        ):
            return None  # a literal '{' (ECMA annex B)
        limit = self.budget.limits.max_repeat
        lo = count_of(parts[0])
        self.budget.check("max_repeat", lo, self.at, "repetition count")
        hi = lo if len(parts) == 1 else count_of(parts[1]) if parts[1] else None
        if isinstance(hi, str) or (hi is not None and hi > limit):
            hi = max(lo, limit)  # beyond the limit: lowered to it (a subset of the matches)
        if hi is not None and hi < lo:
            raise self.error(f"quantifier {{{body}}} has its maximum below its minimum")
        self.i = j + 1
        return lo, hi

    def atom_open(self) -> None:
        """Past a group's opening: `(`, `(?:` or `(?<name>`."""
        self.depth += 1
        self.budget.check("max_nesting", self.depth, self.at, "group nesting")
        self.i += 1
        if self.peek() == "?":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.peek(1) == "<" and self.peek(2) not in ("=", "!"):
                j = self.p.find(">", self.i)
                if j < 0:
                    raise self.error("unterminated group name")
                self.i = j + 1
            else:
                raise self.error("lookaround assertions are not supported")

    def atom(self) -> Node:
        c = self.peek()
        if c == "(":
            self.atom_open()
            inner = self.alternation()
            if self.peek() != ")":
                raise self.error("expecting ')'")
            self.i += 1
            self.depth -= 1
            return inner
        if c == "[":
            return self.char_class()
        if c == ".":
            self.i += 1
            return Chars(LINE_TERMINATORS, negated=True)
        if c == "\\":
            return self.escape(in_class=False)
        if c in ("^", "$"):
            raise self.error(f"anchor {c!r} is only supported at the start/end of the pattern")
        if c in ("*", "+", "?"):
            raise self.error(f"nothing to repeat before {c!r}")
        self.i += 1
        return Lit(c)

    def escape(self, in_class: bool) -> Node:
        self.i += 1
        e = self.peek()
        if not e:
            raise self.error("pattern ends with a backslash")
        self.i += 1
        if e in CLASS_ESCAPES:  # (in a class, its caller picks the set: regex_classes.py)
            return _ClassEscape(e) if in_class else Chars(CLASS_ESCAPES[e][0])
        if e in _CHAR_ESCAPES and not (e == "0" and self.peek().isdigit()):
            return Lit(_CHAR_ESCAPES[e])
        if e == "b" and in_class:
            return Lit("\b")
        if e in "bB":
            raise self.error("word boundaries are not supported")
        if e.isdigit():
            raise self.error("backreferences are not supported")
        if e == "x":
            return Lit(chr(self.hex(2)))
        if e == "u":
            if self.peek() == "{":
                j = self.p.find("}", self.i)
                digits = self.p[self.i + 1 : j]
                if j < 0 or not digits or len(digits) > 6 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                    raise self.error("expecting \\u{H...} with 1 to 6 hex digits")
                value = int(digits, 16)
                if value > MAX_CODE_POINT:
                    raise self.error(f"code point {value:#x} is beyond U+10FFFF")
                self.i = j + 1
                return Lit(chr(value))
            return Lit(chr(self.hex(4)))
        if e == "c" and self.peek().isalpha():
            self.i += 1
            return Lit(chr(ord(self.p[self.i - 1]) % 32))
        if e in "pP":
            raise self.error("Unicode property escapes (\\p{...}) are not supported")
        return Lit(e)

    def hex(self, n: int) -> int:
        digits = self.p[self.i : self.i + n]
        if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
            raise self.error(f"expecting {n} hex digits")
        self.i += n
        return int(digits, 16)

    def class_char(self) -> Node:
        if self.peek() == "\\":
            return self.escape(in_class=True)
        c = self.peek()
        self.i += 1
        return Lit(c)

    def char_class(self) -> Node:
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while first or self.peek() != "]":
            first = False
            if not self.peek():
                raise self.error("unterminated character class")
            lo = self.class_char()
            if isinstance(lo, _ClassEscape):  # what every meaning matches, or (negated class) what any may
                ranges.extend(CLASS_ESCAPES[lo.letter][1 if negated else 0])
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.class_char()
                if isinstance(hi, _ClassEscape):
                    raise self.error("a class escape cannot end a range")
                a, b = ord(lo.text), ord(hi.text)
                if b < a:
                    raise self.error("range out of order in character class")
                ranges.append((a, b))
            else:
                ranges.append((ord(lo.text), ord(lo.text)))
        self.i += 1
        return Chars(tuple(normalize(tuple(ranges), False)), negated)


class _ClassEscape:
    """\\d, \\w, \\s or a negation, met in a character class (the class decides which set it stands for)."""

    __slots__ = ("letter",)

    def __init__(self, letter: str) -> None:
        self.letter = letter


def parse_pattern(pattern: str, where: str = "pattern", limits: Budget | None = None, search: bool = False,
                  memo: dict | None = None) -> Node:  # fmt: skip
    """Grammar nodes (over code points) for strings that fully match `pattern` (search=True: that contain a
    match, as JSON Schema means it: an unanchored start or end matches any text there); `limits` is the
    compilation's Budget (limits.py). `memo` (a compilation's) keeps each pattern's nodes: met again, it is
    charged as if parsed again, but not parsed (a pattern under a shared definition is met at each use)."""
    budget = budget_of(limits)
    key = ("regex", pattern, search)
    known = memo.get(key) if memo is not None else None
    if known is not None:
        budget.charge(known[1], where)
        return known[0]
    budget.charge(len(pattern), where)
    node = _Regex(pattern, where, budget, search).top()
    size, depth = tree_shape(node, budget.limits.max_nesting)
    budget.charge(size, where)
    budget.check("max_nesting", depth, where, "pattern nesting (groups and stacked quantifiers)")
    if memo is not None:
        memo[key] = (node, len(pattern) + size)
    return node


def _factored(options: list[Node]) -> Node:
    """The alternatives with the plain words among them factored into a trie of nested groups (a word list of
    200 zone names holds a branch per shared prefix alive, not one per word)."""
    words = [w for w in map(_word, options) if w]
    if len(words) < 8:
        return alt(*options)
    trie = _trie(sorted(set(words)), 0)
    if trie is None:
        return alt(*options)
    return alt(trie, *(o for o in options if not _word(o)))


def _word(node: Node) -> str | None:
    """The text of a node of literal characters only (the parser writes a run of plain characters as one
    literal, any other one alone)."""
    if isinstance(node, Lit):
        return node.text
    if isinstance(node, Seq) and all(isinstance(i, Lit) for i in node.items):
        return "".join(i.text for i in node.items)
    return None


def _trie(words: list[str], depth: int) -> Node | None:
    """Sorted distinct words as nested groups by first character (iterative over the letters of a group); None
    past _TRIE_DEPTH branchings (a recursion as deep as the words are long: 1,100 words "b", "bb", ... raised
    RecursionError, and a tree deeper than max_nesting is refused anyway)."""
    if depth > _TRIE_DEPTH:
        return None
    groups: dict[str, list[str]] = {}
    ends = False
    for w in words:
        if w:
            groups.setdefault(w[0], []).append(w[1:])
        else:
            ends = True
    options = [Lit("")] if ends else []
    for ch, rest in groups.items():
        prefix = ch
        while len(rest) > 1 and all(r and r[0] == rest[0][0] for r in rest):  # (a shared run: one literal)
            prefix += rest[0][0]
            rest = [r[1:] for r in rest]
        if rest == [""]:
            options.append(Lit(prefix))
            continue
        inner = _trie(rest, depth + 1)
        if inner is None:
            return None
        options.append(seq(Lit(prefix), inner))
    return alt(*options) if options else Lit("")


def _nullable(node: Node) -> bool:
    """Whether the (pattern) node matches the empty string."""
    if isinstance(node, Lit):
        return not node.text
    if isinstance(node, Repeat):
        return node.min == 0 or _nullable(node.item)
    if isinstance(node, Seq):
        return all(map(_nullable, node.items))
    if isinstance(node, Alt):
        return any(map(_nullable, node.options))
    return False


def _starred(node: Node) -> Node:
    """A node N' with N'* the language of node* and no empty match (EMPTY when node matches only "")."""
    if isinstance(node, Repeat):
        return EMPTY if node.max == 0 else _starred(node.item) if _nullable(node) else node
    if isinstance(node, Alt):
        options = [o for o in (_starred(o) if _nullable(o) else o for o in node.options) if o != EMPTY]
        return alt(*options) if options else EMPTY
    if isinstance(node, Seq) and _nullable(node):  # (AB)* with A and B nullable is (A|B)*
        return _starred(Alt(node.items))
    if isinstance(node, Lit) and not node.text:
        return EMPTY
    return node
