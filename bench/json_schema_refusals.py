#!/usr/bin/env python3
"""Every valid test instance llamay refuses on JSONSchemaBench, with where and why (not a test).

    python bench/json_schema_refusals.py /tmp/jsb [--every 10 --offset 3] [--jobs 2] [--out refusals.json]

For each schema llamay compiles: each valid instance (compact JSON, as json_schema_bench.py writes it) is
walked byte by byte; a refused one is listed with its schema file, the byte where the walk died (or "end": the
text is a prefix of an accepted one, or the limit that stopped the step), the JSON path of the instance there,
and the schema keywords that usually explain it (uniqueItems, oneOf, allOf, if, lookarounds, ...). The list is
grouped by those keywords. Invalid instances accepted are listed too (a soundness bug).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

SUSPECT = ("uniqueItems", "oneOf", "allOf", "anyOf", "if", "not", "patternProperties", "dependencies",
           "dependentSchemas", "minProperties", "maxProperties", "propertyNames", "contains", "format",
           "pattern", "multipleOf", "additionalItems", "prefixItems", "$ref")  # fmt: skip


def compact(doc: object) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def keywords(schema: object) -> set[str]:
    """The suspect keywords anywhere in the document, and `lookaround` for a pattern with (?= (?! (?<= (?<!."""
    out: set[str] = set()
    todo = [schema]
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                if k in SUSPECT:
                    out.add(k)
                if k == "pattern" and isinstance(v, str) and re.search(r"\(\?<?[=!]", v):
                    out.add("lookaround")
                todo.append(v)
        elif isinstance(x, list):
            todo.extend(x)
    return out


def path_at(text: str, offset: int) -> str:
    """The JSON path of the value being written at `offset` of compact JSON `text`."""
    stack: list[list] = []  # [kind, key or index]
    i, in_str, key_next = 0, False, False
    start = 0
    while i < min(offset, len(text)):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
                if key_next and stack and stack[-1][0] == "o":
                    stack[-1][1] = text[start + 1 : i]
                    key_next = False
        elif c == '"':
            in_str, start = True, i
        elif c == "{":
            stack.append(["o", None])
            key_next = True
        elif c == "[":
            stack.append(["a", 0])
        elif c in "}]":
            stack.pop()
        elif c == ",":
            if stack and stack[-1][0] == "a":
                stack[-1][1] += 1
            else:
                key_next = True
        i += 1
    return "/" + "/".join(str(k) for _, k in stack)


def alarm(*_):
    raise TimeoutError


def check(path: str, timeout: float) -> list[dict]:
    import llamay.constraints as C
    from llamay.constraints.automaton import Automaton

    data = json.loads(Path(path).read_text())
    name = Path(path).name
    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    out: list[dict] = []
    try:
        try:
            auto = Automaton(C.compile_grammar(C.schema_to_grammar(data["schema"])))
        except C.ConstraintError:
            return [{"file": name, "status": "refused"}]
        out.append({"file": name, "status": "ok"})
        for n, t in enumerate(data.get("tests", [])):
            text = compact(t["data"])
            raw = text.encode()
            st, where = auto.initial, None
            try:
                for j, b in enumerate(raw):
                    st = auto.step(st, b)
                    if st is None:
                        where = j
                        break
                else:
                    where = None if st.complete else "end"
            except C.ConstraintLimitError as e:
                where = f"limit {e.limit} at {j}"
            if (where is None) == t["valid"]:
                continue
            rec = {"file": name, "test": n, "valid": t["valid"], "where": where, "len": len(raw)}
            if isinstance(where, int):
                off = len(raw[:where].decode(errors="ignore"))
                rec["path"] = path_at(text, off)
                rec["context"] = text[max(0, off - 40) : off] + "⟦" + text[off : off + 30]
            out.append(rec)
    except TimeoutError:
        out.append({"file": name, "status": "timeout"})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    kw = sorted(keywords(data["schema"]))
    for r in out:
        r["keywords"] = kw
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--out", help="write the records here (JSON)")
    ap.add_argument("--only", help="only these files (comma-separated names)")
    args = ap.parse_args()
    files = sorted(Path(args.dir).expanduser().glob("*.json"))
    slice_of = {f.name: i % 10 for i, f in enumerate(files)}
    files = files[args.offset :: args.every] if args.every > 1 else files
    if args.only:
        keep = set(args.only.split(","))
        files = [f for f in files if f.name in keep]
    with ProcessPoolExecutor(args.jobs) as ex:
        recs = [r for rs in ex.map(check, map(str, files), [args.timeout] * len(files), chunksize=4) for r in rs]
    status = Counter(r["status"] for r in recs if "status" in r)
    bad = [r for r in recs if r.get("valid")]
    unsound = [r for r in recs if "valid" in r and not r["valid"]]
    print(f"{len(files)} schemas: {dict(status)}; valid refused {len(bad)}; invalid accepted {len(unsound)}")
    per_slice = Counter(slice_of[r["file"]] for r in bad)
    if args.every == 1:
        print("valid refused per slice (every 10th):", [per_slice.get(i, 0) for i in range(10)])
        for r in bad:
            r["slice"] = slice_of[r["file"]] % 10
    groups = Counter()
    for r in bad:
        groups[" ".join(k for k in r["keywords"] if k not in ("$ref", "format", "pattern", "anyOf"))] += 1
    for g, c in groups.most_common():
        print(f"  {c:4d}  {g or '(none of the suspects)'}")
    for r in sorted(bad + unsound, key=lambda r: (not r["valid"], r["file"])):
        tag = "VALID REFUSED" if r["valid"] else "INVALID ACCEPTED"
        print(f"{tag} {r['file']} #{r['test']} at {r['where']}/{r['len']} {r.get('path', '')} "
              f"[{' '.join(r['keywords'])}]\n    {r.get('context', '')}")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps(recs, ensure_ascii=False))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
