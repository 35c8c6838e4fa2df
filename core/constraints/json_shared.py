"""A schema document's equal parts made one object, so what the compiler keeps per schema object serves every
copy: a property's visit (`SchemaCompiler.visit_shared`), an anyOf / oneOf's alternatives, an allOf's merge.

Generated schemas repeat themselves: the same definitions inlined under every property that uses them, the
same oneOf under a property and under an array of them. Compiled as they came, each copy was visited, merged
and told apart again (a large document's copies were most of its compile).

    {"a": {"oneOf": [X, Y]}, "b": {"items": {"oneOf": [X, Y]}}}  ->  both oneOf lists one object

Only parts equal as JSON (keys in the same order, values of the same type: 1, 1.0 and true stay apart) but for
their annotations (a description, a title: the copy keeps the first one's; an enum's or const's values are
data, kept whole), and only in documents with no identifier below the root (`$id`, `id`, an anchor): a part's
base URI is then the root's wherever it is, so its meaning does not depend on where it is (json_refs.py
resolves by position otherwise). The copy is made once per compilation, in time linear in the document
(check_document charged it); the caller's document is never changed.
"""

from __future__ import annotations

from typing import Any

# keys that give a schema its own base URI or a name to resolve: a document with one below its root is kept
_IDENTIFIERS = frozenset({"$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"})
# annotations, left out of a schema's content: a key of these names holding a dict or a boolean may be a
# property's schema, and is kept
_ANNOTATIONS = frozenset({"title", "description", "$comment", "default", "examples", "deprecated", "readOnly",
                          "writeOnly"})  # fmt: skip
_DATA = frozenset({"enum", "const"})  # keywords whose value is data, kept whole: {"enum": [{"title": 1}]}
_FROM = 1024  # values in the document from which the copy is made (in smaller ones, few copies cost anything)


def shared_copy(schema: Any, values: int) -> tuple[Any, bool]:
    """(`schema` with equal containers one object, True: a copy, and the document has no identifier below its
    root, so every part's base URI is the root's) or (`schema` itself, False: fewer than _FROM `values`, as
    check_document counted them, or identifiers). Iterative. Called after check_document, which charged a
    compilation's budget for every value and bounded the nesting (so no cycle either): this walk is linear in
    what it charged."""
    if not isinstance(schema, dict) or values < _FROM:
        return schema, False
    order = _containers(schema)
    if order is None:
        return schema, False
    one: dict[tuple, Any] = {}  # content -> the one object with it
    made: dict[tuple[int, bool], Any] = {}  # (id(a container of `schema`), in data) -> its shared copy
    get = made.get
    for node, data in reversed(order):  # (children before parents: `order` lists each parent before them)
        if (id(node), data) in made:
            continue
        # (a part of the content: a container's copy by id, a string as it is, another value with its type; a
        # float by its text, so -0.0 and 0.0 stay apart)
        if type(node) is dict:
            content = tuple([
                (k, v if type(v) is str else id(m) if (m := get((id(v), data or k in _DATA))) is not None
                 else _scalar(v))
                for k, v in node.items() if data or k not in _ANNOTATIONS or type(v) in (dict, bool)
            ])  # fmt: skip
        else:
            content = ("l", *[v if type(v) is str else id(m) if (m := get((id(v), data))) is not None else _scalar(v)
                              for v in node])  # fmt: skip
        kept = one.get(content)
        if kept is None:  # (the first with this content: a copy holding its children's copies)
            if type(node) is dict:
                kept = {k: get((id(v), data or k in _DATA), v) for k, v in node.items()}
            else:
                kept = [get((id(v), data), v) for v in node]
            one[content] = kept
        made[id(node), data] = kept
    return made[id(schema), False], True


def _containers(schema: dict) -> list | None:
    """Every dict and list of the document with whether it is data (in an enum or const), each parent before
    its children; None when a dict below the root holds an identifier (an `id` that is a string: a property
    named "id" holds a schema, an object), or a key that is not a string (a document built in Python)."""
    order, todo = [], [(schema, False)]
    containers = (dict, list)
    while todo:
        node, data = todo.pop()
        order.append((node, data))
        if type(node) is dict:
            if node is not schema and (not _IDENTIFIERS.isdisjoint(node) or type(node.get("id")) is str):
                return None
            for k, v in node.items():
                if type(k) is not str:
                    return None
                if type(v) in containers:
                    todo.append((v, data or k in _DATA))
        else:
            todo.extend([(v, data) for v in node if type(v) in containers])
    return order


def values_key(schema: dict, keys: frozenset) -> tuple:
    """The values of `schema`'s `keys`, in order, as a key: a container by id (after shared_copy, equal ones are
    one object; the caller keeps `schema` alive, so an id stays its own), another value with its type."""
    return tuple((k, id(v) if type(v) in (dict, list) else _scalar(v)) for k, v in schema.items() if k in keys)


def _scalar(value: Any) -> Any:
    return (float, repr(value)) if type(value) is float else (type(value), value)
