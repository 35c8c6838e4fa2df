"""GBNF for any JSON value, and the primitives the JSON Schema compiler builds on.

Whitespace follows llama.cpp's convention so outputs look the same as there: after a token, optionally one
space or one or two newlines and up to 20 indentation characters (`space`), never unbounded. Numbers have at
most 16 integral and 16 fractional digits, as in llama.cpp (a model cannot run away with digits).
"""

from __future__ import annotations

from functools import cache

from .grammar import Node

SPACE_RULE = '| " " | "\\n"{1,2} [ \\t]{0,20}'

# name -> right-hand side; each may refer to the ones it needs (see DEPENDS)
PRIMITIVES: dict[str, str] = {
    "space": SPACE_RULE,
    "boolean": '("true" | "false") space',
    "null": '"null" space',
    "char": '[^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\bfnrt] | "u" [0-9a-fA-F]{4})',
    # a character of a string with a minLength: no UTF-16 surrogate escapes, as a pair of them would be two
    # characters here and one in the string (too short); a subset of `char`
    "length-char": '[^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\bfnrt] | "u" '
    "([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))",
    "string": '"\\"" char* "\\"" space',
    "integral-part": "[0] | [1-9] [0-9]{0,15}",
    "decimal-part": "[0-9]{1,16}",
    "integer": '("-"? integral-part) space',
    "number": '("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space',
    "value": "object | array | string | number | boolean | null",
    "object": '"{" space ( string ":" space value ("," space string ":" space value)* )? "}" space',
    "array": '"[" space ( value ("," space value)* )? "]" space',
}

DEPENDS: dict[str, tuple[str, ...]] = {
    "space": (),
    "boolean": ("space",),
    "null": ("space",),
    "char": (),
    "length-char": (),
    "string": ("char", "space"),
    "integral-part": (),
    "decimal-part": (),
    "integer": ("integral-part", "space"),
    "number": ("integral-part", "decimal-part", "space"),
    "value": ("object", "array", "string", "number", "boolean", "null"),
    "object": ("string", "value", "space"),
    "array": ("value", "space"),
}


# JSON's exponent may have leading zeros (Python writes 1.6e-05); llama.cpp's grammars write none
JSON_NUMBER = '("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space'


def primitive_rules(
    max_string_length: int | None = None, max_items: int | None = None, json_exponent: bool = False
) -> dict[str, str]:
    """PRIMITIVES, with strings, arrays and objects bounded when caps are given (generation limits), and numbers
    with JSON's exponents (`json_exponent`: leading zeros) rather than llama.cpp's."""
    rules = dict(PRIMITIVES)
    if json_exponent:
        rules["number"] = JSON_NUMBER
    if max_string_length is not None:
        rules["string"] = rules["string"].replace("char*", f"char{{0,{max_string_length}}}")
    if max_items is not None:
        more = "*" if max_items <= 0 else f"{{0,{max(max_items - 1, 0)}}}"
        rules["object"] = (
            '"{" space ( string ":" space value ("," space string ":" space value)' + more + ' )? "}" space'
        )
        rules["array"] = '"[" space ( value ("," space value)' + more + ' )? "]" space'
    return rules


def with_dependencies(names) -> list[str]:
    """`names` and every primitive they need, each once."""
    out: list[str] = []
    todo = list(names)
    while todo:
        n = todo.pop()
        if n not in out:
            out.append(n)
            todo.extend(DEPENDS[n])
    return out


def json_gbnf(root: str = "value", max_string_length: int | None = None, max_items: int | None = None) -> str:
    """GBNF for one JSON value (`root="object"`: an object, as OpenAI's `json_object` response format);
    the caps bound strings and arrays/objects (outputs stay JSON; a small model cannot ramble forever)."""
    if root not in ("value", "object", "array"):
        raise ValueError(f"root must be value, object or array, not {root!r}")
    rules = primitive_rules(max_string_length, max_items)
    lines = [f"root ::= {root}"]
    lines += [f"{n} ::= {rules[n]}" for n in sorted(with_dependencies(["value"]))]
    return "\n".join(lines) + "\n"


@cache
def primitive_nodes(
    max_string_length: int | None = None, max_items: int | None = None, json_exponent: bool = False
) -> dict[str, Node]:
    """`primitive_rules` as grammar nodes (parsed once per set of options)."""
    from .gbnf import parse

    rules = primitive_rules(max_string_length, max_items, json_exponent)
    return parse("".join(f"{n} ::= {rhs}\n" for n, rhs in rules.items()), root="space").rules
