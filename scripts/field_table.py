"""Write docs/server.md's field table from native/server/fields.py (between its `fields:start` / `fields:end`
markers): `python scripts/field_table.py` rewrites it, `--check` exits 1 when it differs.
tests/server/test_fields.py checks the same rows."""

from __future__ import annotations

import sys
from pathlib import Path

from llamay.native.server.fields import NOT_SERVED, ROUTES, TABLES

DOCS = Path(__file__).resolve().parents[1] / "docs" / "server.md"
START, END = "<!-- fields:start -->", "<!-- fields:end -->"
MARKS = {"yes": "✓", "noop": "n/a", "value": "only", "no": "400"}


def places() -> list[str]:
    """Where each table's object is: a route's body, or a field of another table."""
    out = ["| body | what |", "|---|---|"]
    inside: dict[str, list[str]] = {}
    for table, spec in TABLES.items():
        for name, f in spec.items():
            if f.sub:
                inside.setdefault(f.sub, []).append(f"`{name}` of `{table}`")
    for table in TABLES:
        where = ROUTES.get(table) or ", ".join(inside.get(table, []))
        out.append(f"| `{table}` | {where} |")
    return out


def rows() -> str:
    out = [START, "", *places(), "", "| body | field | here | from | why |", "|---|---|---|---|---|"]
    tail = ["", "Routes of those APIs not served here (404):", "", "| routes | from | why |", "|---|---|---|"]
    tail += [f"| {routes} | {src} | {why} |" for routes, (src, why) in NOT_SERVED.items()]
    for table, spec in TABLES.items():
        for name, f in spec.items():
            why = f.why
            if f.status == "value":
                values = ", ".join(f"`{_json(v)}`" for v in f.values if v is not None)
                why = f"only {values}: {why}"
            out.append(f"| `{table}` | `{name}` | {MARKS[f.status]} | {f.src} | {why.replace('|', '/')} |")
    return "\n".join([*out, *tail, "", END])


def _json(v: object) -> str:
    import json

    return json.dumps(v)


def main(argv: list[str]) -> int:
    text = DOCS.read_text(encoding="utf-8")
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    new = head + rows() + tail
    if "--check" in argv:
        return 0 if new == text else 1
    DOCS.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
