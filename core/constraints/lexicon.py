"""Lexicons: the output is one of a closed list of words or phrases (or several, joined by a separator).

The words are factored into a character trie before they become rules, so shared prefixes are one path and
the automaton carries one stack per branch, not one per word:

    ["yes", "yesterday", "no"]  ->  root ::= lex-0
                                    lex-0 ::= "yes" lex-1 | "no"
                                    lex-1 ::= "" | "terday"
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import count

from .errors import ConstraintError
from .grammar import EMPTY, Grammar, Lit, Node, Ref, Repeat, alt, seq
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
    """Rules matching exactly one of `words` (distinct, none empty), factored into a character trie: one rule
    per branching node, named by `new_name()` in preorder (the first is the entry). Iterative: any word length
    is safe."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = True
    rules: dict[str, Node] = {}
    todo: list[tuple[dict, str]] = [(trie, new_name())]
    while todo:
        node, name = todo.pop()
        options: list[Node] = [EMPTY] if "" in node else []
        below = []
        for ch in sorted(k for k in node if k):
            text, sub = ch, node[ch]
            while len(sub) == 1 and "" not in sub:  # a chain with no branch: one literal
                (nxt,) = sub
                text += nxt
                sub = sub[nxt]
            if set(sub) == {""}:
                options.append(Lit(text))
            else:
                child = new_name()
                below.append((sub, child))
                options.append(seq(Lit(text), Ref(child)))
        rules[name] = alt(*options)
        todo.extend(reversed(below))
    return rules
