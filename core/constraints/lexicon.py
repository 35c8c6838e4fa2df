"""Lexicons: the output is one of a closed list of words or phrases (or several, joined by a separator).

The words are factored into a character trie before they become rules, so shared prefixes are one path and
the automaton carries one stack per branch, not one per word:

    ["yes", "yesterday", "no"]  ->  root ::= lex-0
                                    lex-0 ::= "yes" lex-1 | "no"
                                    lex-1 ::= "" | "terday"
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from itertools import count

from .errors import ConstraintError
from .grammar import EMPTY, MAX_CODE_POINT, Alt, Grammar, Lit, Node, Ref, Repeat, Seq, seq
from .limits import Budget, ConstraintLimits, budget_of


def lexicon_grammar(
    words: Iterable[str],
    separator: str | None = None,
    min_count: int = 1,
    max_count: int | None = 1,
    limits: ConstraintLimits | Budget | None = None,
) -> Grammar:
    """A grammar for one of `words`; with `separator`, between min_count and max_count of them joined by it.
    `limits` (or a compilation's Budget) bounds the work (limits.py)."""
    budget = budget_of(limits)
    words = list(words)
    if not words or any(not isinstance(w, str) or not w for w in words):
        raise ConstraintError("a lexicon is a list of words (strings), at least one, none empty")
    vocab = list(dict.fromkeys(words))
    if (max_count is not None and max_count < min_count) or min_count < 1 or (max_count != 1 and separator is None):
        raise ConstraintError("lexicon counts need 1 <= min_count <= max_count, and a separator above one")
    budget.charge(sum(map(len, vocab)), "lexicon")
    budget.check("max_repeat", min_count if max_count is None else max_count, "lexicon", "word count")
    names = (f"lex-{i}" for i in count())
    rules = word_trie(vocab, lambda: next(names))
    word = Ref(next(iter(rules)))
    if max_count == 1:
        root: Node = word
    else:
        more = Repeat(seq(Lit(separator), word), min_count - 1, None if max_count is None else max_count - 1)
        root = seq(word, more)
    return Grammar({"root": root, **rules})


def word_trie(words: list[str], new_name: Callable[[], str]) -> dict[str, Node]:
    """Rules matching exactly one of `words` (none empty), factored into a character trie: one rule per
    branching node, named by `new_name()` in preorder (the first is the entry). Iterative: any word length
    is safe. (json_values.py builds the same nodes lazily, one as the automaton reaches it: `trie_node`.)"""
    words = sorted(set(words))
    rules: dict[str, Node] = {}
    todo: list[tuple[int, int, int, str]] = [(0, len(words), 0, new_name())]  # (run start, end, depth, its rule)
    below: list[tuple[int, int, int, str]] = []  # (the children of the node being made)

    def child(lo: int, end: int, n: int) -> str:
        below.append((lo, end, n, new_name()))
        return below[-1][3]

    while todo:
        lo, hi, depth, name = todo.pop()
        rules[name] = trie_node(words, lo, hi, depth, child)
        todo.extend(reversed(below))
        below.clear()
    return rules


def trie_node(words: list[str], lo: int, hi: int, depth: int, child: Callable[[int, int, int], str]) -> Node:
    """The rule body of one trie node: the run words[lo:hi] of `words` (sorted, distinct) that share their first
    `depth` characters. The trie is never built as one: the node's children are the runs of their next
    character (in character order), each named by `child(start, end, n)` (the run past the n characters its
    words share), a chain with no branch the run's common prefix. A run's end is a binary search and its
    prefix a comparison of slices (in C: the work is per node, not per word and character)."""
    options: list[Node] = []
    if lo < hi and len(words[lo]) == depth:  # a word ends here (it sorts first in its run)
        options.append(EMPTY)
        lo += 1
    while lo < hi:
        first = words[lo]
        ch = ord(first[depth])
        # (the words with this character next sort before the node's prefix followed by the next one)
        end = hi if ch == MAX_CODE_POINT else bisect_left(words, first[:depth] + chr(ch + 1), lo + 1, hi)
        n = _common_end(first, words[end - 1], depth + 1)
        text = first[depth:n]
        if end - lo == 1:  # (one word: its prefix is the whole of it)
            options.append(Lit(text))
        else:
            options.append(Seq((Lit(text), Ref(child(lo, end, n)))))
        lo = end
    return options[0] if len(options) == 1 else Alt(tuple(options))  # (distinct: alt()'s check skipped)


def _common_end(a: str, b: str, n: int) -> int:
    """The end of the prefix `a` and `b` share, knowing they share a[:n] (a binary search on slices)."""
    lo, hi = n, min(len(a), len(b))  # (a[:lo] is shared; a[:hi + 1] is not, or hi is the shorter's length)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
