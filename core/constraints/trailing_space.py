"""The output ends where its JSON value does: no whitespace after the root value.

A JSON grammar writes optional whitespace after every value (llama.cpp's `space` rule), the root value too, so
a model could follow a finished document with spaces and newlines before it stopped, and clients saw them. The
constraints built for generation (json_schema_constraint, json_constraint) take the root without it: its rule
loses the `space` in its last place, and every rule reached in a last place gets a copy without it (`-end`,
each made once). Whitespace between tokens is unchanged. The language is the old one without its
trailing whitespace: every document is still valid, and only what followed the value is gone.

    root ::= object                           root ::= object-end
    object ::= "{" space ... "}" space   ->   object ::= "{" space ... "}" space
                                              object-end ::= "{" space ... "}"

A lazy rule in a last place (none of the JSON grammars has one: an object's members end before its "}") and
a repetition's last item are left as they are: the whitespace after them stays allowed, as before.
`schema_to_grammar` and `schema_to_gbnf` keep llama.cpp's layout; only these constraints change.
"""

from __future__ import annotations

from .grammar import EMPTY, Alt, Grammar, Node, Ref, Seq, alt, seq

SPACE = "space"


def without_trailing_space(grammar: Grammar) -> Grammar:
    """`grammar` (changed in place: lazy rules it builds later add to its rules) with its root's last `space`
    left out, through the rules that end it. The root rule keeps its name (refusals name it as before): the
    JSON grammars never refer to it, and a reference would only lose whitespace, a subset."""
    rules, copies = grammar.rules, {grammar.root: grammar.root}
    todo = [grammar.root]

    def end_of(name: str) -> str:
        """The name of rule `name`'s copy without its trailing space (made on first ask, built from `todo`)."""
        copy = copies.get(name)
        if copy is None:
            copy = copies[name] = _fresh(grammar, f"{name}-end")
            rules[copy] = EMPTY  # (reserved: its body is set below)
            todo.append(name)
        return copy

    def ending(node: Node) -> Node:
        """`node` in a last place, without the space that would end it."""
        kind = type(node)
        if kind is Seq and node.items:
            return seq(*node.items[:-1], ending(node.items[-1]))
        if kind is Alt:
            return alt(*(ending(o) for o in node.options))
        if kind is Ref:
            if node.name == SPACE:
                return EMPTY
            if node.name in rules:  # (a lazy rule or an undefined name: as it is)
                return Ref(end_of(node.name))
        return node

    while todo:
        name = todo.pop()
        rules[copies[name]] = ending(rules[name])
    return grammar


def _fresh(grammar: Grammar, name: str) -> str:
    key, n = name, 0
    while grammar.has(key):
        n += 1
        key = f"{name}-{n}"
    return key
