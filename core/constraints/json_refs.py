"""Where a `$ref` points: base URIs (`$id`, draft-04 `id`), plain-name fragments (`$anchor`, `"$id": "#foo"`,
`"id": "#foo"`) and JSON pointers, resolved as the spec says (RFC 3986 against the enclosing base URI).

    Resolver(schema).resolve("#jumpDrive", base)   -> the subschema whose `$id`/`id` is "#jumpDrive"

The document is walked once, iteratively, through the keywords that hold schemas only (so a property named
`id` or an `enum` value is never taken for an identifier). A reference to anything outside the document is
refused by name, never fetched. Which keyword identifies a schema follows the `$schema` draft: draft 3/4 `id`,
draft 6/7 `$id` (with plain-name fragments), 2019-09 / 2020-12 `$id` and `$anchor`; a document that names no
draft accepts all of them (`id` only where no `$id` is).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urldefrag
from urllib.parse import urljoin as _urljoin

from .errors import ConstraintError
from .limits import Budget

DEFAULT_BASE = "https://llamay.invalid/schema.json"  # the root's base when it has no absolute $id

# keywords whose value is a schema, an object of schemas, or a list of schemas
SCHEMA_VALUED = frozenset({
    "additionalProperties", "additionalItems", "items", "not", "if", "then", "else", "contains", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems", "contentSchema",
})  # fmt: skip
SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_HOLDERS = SCHEMA_VALUED | SCHEMA_MAPS | SCHEMA_LISTS | {"dependencies"}  # keywords that may hold schemas


def urljoin(base: str, ref: str) -> str:
    """RFC 3986 resolution; a fragment-only reference also against bases urllib cannot join (urn:, tag:)."""
    if ref.startswith("#") or not ref:
        return urldefrag(base)[0] + ref
    return _urljoin(base, ref)


def _draft(schema: Any) -> int:
    """4 for drafts 3/4, 7 for 6/7, 2019 for 2019-09 and later, 0 when the document names none."""
    uri = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(uri, str):
        return 0
    for marker, draft in (("draft-03", 4), ("draft-04", 4), ("draft-06", 7), ("draft-07", 7)):
        if marker in uri:
            return draft
    return 2019


def subschemas(node: dict) -> list[Any]:
    """The schemas directly inside `node` (values of `dependencies` that are schemas too)."""
    out: list[Any] = []
    for key, value in node.items():
        if key not in _HOLDERS:  # (most keys hold no schema: one test for them)
            continue
        if key in SCHEMA_MAPS and isinstance(value, dict):
            out.extend(value.values())
        elif key == "dependencies" and isinstance(value, dict):
            out.extend(v for v in value.values() if isinstance(v, (dict, bool)))
        elif key in SCHEMA_LISTS and isinstance(value, list):
            out.extend(value)
        elif key in SCHEMA_VALUED:
            out.append(value)
    return out


class Resolver:
    """The document's identifiers: base URI of every schema object (by id()), resources by URI, anchors by
    URI#name. Built once per compilation, charged to its budget. `flat`: the document has no identifier below
    its root (json_shared.shared_copy walked it), so every part's base URI is the root's and only the root is
    read (`base_of` answers the base it is given: the root's, wherever the compiler is in such a document)."""

    def __init__(self, schema: Any, budget: Budget, flat: bool = False) -> None:
        self.root = schema
        self.draft = _draft(schema)
        uri = schema.get("$schema") if isinstance(schema, dict) else None
        self.draft3 = isinstance(uri, str) and "draft-03" in uri  # (its own keywords mean nothing in later drafts)
        self.ref_siblings_ignored = self.draft in (4, 7)  # (drafts 3 to 7: a $ref's siblings mean nothing)
        self.base: dict[int, str] = {}  # id(schema object) -> its base URI
        self.resources: dict[str, Any] = {}  # absolute URI without fragment -> schema
        self.anchors: dict[str, Any] = {}  # absolute URI#name -> schema
        self.root_base = DEFAULT_BASE
        self.resolved: dict[tuple[str, str], tuple[Any, str, str]] = {}  # (ref, base) -> resolve's answer
        todo = [(schema, DEFAULT_BASE)]
        while todo:
            node, base = todo.pop()
            if not isinstance(node, dict):
                continue
            budget.charge(1, "#")
            base = self.enter(node, base)
            if node is schema:
                self.root_base = base
                self.resources.setdefault(base, node)
            if not flat:
                todo.extend((s, base) for s in subschemas(node))

    def enter(self, node: dict, base: str) -> str:
        """`node`'s base URI (registering its identifier and anchor), given its parent's."""
        if "$id" not in node and "id" not in node and "$anchor" not in node:  # (most schemas: no identifier)
            self.base[id(node)] = base
            return base
        ident = node.get("$id") if self.draft != 4 else None
        if not isinstance(ident, str) and self.draft in (0, 4) and "$id" not in node:
            ident = node.get("id")
        if isinstance(ident, str):
            uri, frag = urldefrag(urljoin(base, ident))
            if frag and self.draft != 2019:  # "#foo" (draft 4-7): a plain-name fragment of the current base
                self.anchors.setdefault(f"{uri}#{frag}", node)
            if uri:
                base = uri
                self.resources.setdefault(uri, node)
        anchor = node.get("$anchor")
        if isinstance(anchor, str) and self.draft in (0, 2019):
            self.anchors.setdefault(f"{base}#{anchor}", node)
        self.base[id(node)] = base
        return base

    def base_of(self, node: Any, default: str) -> str:
        # (no isinstance: the keys are ids of the document's dicts, alive as long as it is, so no other object
        # alive has one)
        return self.base.get(id(node), default)

    def resolve(self, ref: Any, base: str, path: str) -> tuple[Any, str, str]:
        """(the schema `ref` points at, its base URI, a key naming it absolutely) for a `$ref` met where the
        base URI is `base`."""
        known = self.resolved.get((ref, base)) if isinstance(ref, str) else None
        if known is None:  # (a schema's refs are met again and again: merges, branches, derefs)
            known = self.resolved[ref, base] = self._resolve(ref, base, path)
        return known

    def _resolve(self, ref: Any, base: str, path: str) -> tuple[Any, str, str]:
        if not isinstance(ref, str):
            raise ConstraintError(f"$ref at {path}: expecting a string, not {type(ref).__name__}")
        absolute = urljoin(base, ref)
        uri, frag = urldefrag(absolute)
        if frag and not frag.startswith("/"):
            node = self.anchors.get(f"{uri}#{unquote(frag)}")
            if node is None:
                raise ConstraintError(f"$ref {ref!r} at {path}: no schema of the document is named #{frag}")
            return node, self.base_of(node, uri), f"{uri}#{frag}"
        node = self.resources.get(uri)
        if node is None:
            raise ConstraintError(
                f"$ref {ref!r} at {path}: {uri} is not this document or a schema in it (external references are not"
                " fetched)"
            )
        node_base = uri
        for raw in unquote(frag).split("/")[1:] if frag else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(part)] if isinstance(node, list) else node[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise ConstraintError(f"$ref {ref!r} at {path}: {part!r} is not in the schema") from None
            node_base = self.base_of(node, node_base)
        return node, node_base, f"{uri}#{frag}"
