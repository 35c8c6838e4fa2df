"""`llamay info -m FILE [--json]`: architecture, hyper-parameters, tokenizer, metadata, tensors, tensor audit."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from llamay.gguf import open_gguf
from llamay.model_card import describe
from llamay.native.commands import MODEL_HELP


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="describe a GGUF file and audit its tensors")
    p.add_argument("-m", "--model", help=MODEL_HELP)
    p.add_argument(
        "--architectures", action="store_true", help="list the supported architectures, their aliases, the refused"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object for scripts")
    p.add_argument("--all-metadata", action="store_true", help="do not summarise long arrays and strings")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from llamay.native.store import resolve_model

    if args.architectures:
        return _architectures(args.json)
    if not args.model:
        sys.stderr.write("llamay info: give -m MODEL (or --architectures for the list of architectures)\n")
        return 2
    with open_gguf(resolve_model(args.model)) as f:
        d = describe(f)
        if args.all_metadata:
            d["metadata"] = {k: {"type": fl.type.name, "value": fl.value} for k, fl in f.fields.items()}
    out = sys.stdout
    if args.json:
        json.dump(d, out, indent=1, ensure_ascii=False)
        out.write("\n")
    else:
        out.write(format_text(d))
    return 0 if d["audit"]["status"] in ("clean", "vocab-only") else 2


def _architectures(as_json: bool) -> int:
    from llamay.arch import ALIASES, ARCHITECTURES
    from llamay.arch.refused import REFUSED

    if as_json:
        d = {
            "supported": {n: a.summary for n, a in sorted(ARCHITECTURES.items())},
            "aliases": dict(sorted(ALIASES.items())),
            "refused": dict(sorted(REFUSED.items())),
        }
        json.dump(d, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    w = max(map(len, (*ARCHITECTURES, *REFUSED)))
    lines = ["supported architectures (general.architecture):"]
    for n, a in sorted(ARCHITECTURES.items()):
        also = [x for x, t in sorted(ALIASES.items()) if t == n]
        lines.append(f"  {n:<{w}}  {a.summary}" + (f" (also read as: {', '.join(also)})" if also else ""))
    lines.append("refused at load:")
    lines += [f"  {n:<{w}}  {why}" for n, why in sorted(REFUSED.items())]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _short(v: Any) -> str:
    if isinstance(v, dict) and "count" in v:
        first = ", ".join(json.dumps(x, ensure_ascii=False) for x in v["first"])
        return f"[{v['count']} × {v['type']}: {first}, ...]"
    return json.dumps(v, ensure_ascii=False)


def format_text(d: dict[str, Any]) -> str:
    lines = [f"file          {d['file']} ({_human(d['size'])})"]
    if d.get("shards"):
        lines.append(f"split         {len(d['shards'])} shards (llama.cpp's gguf-split), read as one model")
    lines.append(f"format        GGUF v{d['gguf_version']}, alignment {d['alignment']}, data at {d['data_offset']}")
    a = d["architecture"]
    state = a.get("summary") if a["supported"] else "NOT SUPPORTED"
    lines.append(f"architecture  {a['name']} ({state})")
    if a.get("identifies_as"):
        lines.append(
            f"identifies as {a['identifies_as']} ({a['identified_by']}; the architecture field names the block)"
        )
    if "error" in a:
        lines.append(f"              {a['error']}")
    for k, v in a.get("hyperparameters", {}).items():
        if isinstance(v, dict):
            v = ", ".join(f"{kk}={vv}" for kk, vv in v.items() if vv is not None)
        elif isinstance(v, list):  # per-layer flags
            v = "".join("1" if x else "0" for x in v) or "-"
        lines.append(f"  {k:<22} {v}")
    t = d["tokenizer"]
    if t["model"]:
        lines.append(
            f"tokenizer     {t['model']}: {t['kind']}, pre {t['pre']!s}, {t['tokens']} tokens, "
            f"chat template: {'yes' if t['chat_template'] else 'no'}"
        )
    lines.append(f"metadata      {len(d['metadata'])} keys")
    for k, m in d["metadata"].items():
        lines.append(f"  {k:<44} {m['type']:<8} {_short(m['value'])}")
    types = ", ".join(f"{k} ×{v}" for k, v in d["tensor_types"].items())
    lines.append(f"tensors       {len(d['tensors'])} ({_human(d['tensor_bytes'])}){': ' + types if types else ''}")
    if d["tensors"]:
        w = max(len(x["name"]) for x in d["tensors"])
        lines.append(f"  {'name':<{w}}  {'type':<8} {'shape':<20} {'bytes':>12}")
        for x in d["tensors"]:
            shape = "×".join(map(str, x["shape"]))
            lines.append(f"  {x['name']:<{w}}  {x['type']:<8} {shape:<20} {x['bytes']:>12}")
    au = d["audit"]
    lines.append(f"audit         {au['status']}: {au['message']}")
    for name in au["unread"]:
        lines.append(f"  unread: {name}")
    return "\n".join(lines) + "\n"
