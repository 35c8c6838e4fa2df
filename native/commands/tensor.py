"""`llamay tensor FILE NAME -o OUT`: write one tensor dequantised to little-endian float32."""

from __future__ import annotations

import argparse
import os
import sys

from llamay.errors import LlamayError
from llamay.ggml_types import row_bytes
from llamay.gguf import open_gguf

ROWS_PER_CHUNK = 256  # rows decoded per write: bounded memory for huge embedding tables


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tensor", help="write a tensor dequantised as little-endian float32")
    p.add_argument("file", help="GGUF file")
    p.add_argument("name", help="tensor name, e.g. blk.0.attn_q.weight")
    p.add_argument("-o", "--output", required=True, help="output file ('-' for stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with open_gguf(args.file) as f:
        info = f.tensors.get(args.name)
        if info is None:
            near = [n for n in f.tensors if args.name.split(".")[-2:][0] in n][:5]
            hint = f"; similar: {', '.join(near)}" if near else ""
            raise LlamayError(f"{args.file}: no tensor named {args.name!r} ({len(f.tensors)} tensors){hint}")
        from llamay.quants import dequantize

        data = f.tensor_data(info)
        row = row_bytes(info.type, info.shape[0])
        to_stdout = args.output == "-"
        tmp = None if to_stdout else args.output + ".partial"
        out = sys.stdout.buffer if to_stdout else open(tmp, "wb")  # noqa: SIM115
        try:
            for r0 in range(0, info.n_rows, ROWS_PER_CHUNK):
                r1 = min(info.n_rows, r0 + ROWS_PER_CHUNK)
                values = dequantize(info.type, data[r0 * row : r1 * row], (r1 - r0) * info.shape[0])
                if sys.byteorder != "little":
                    values.byteswap()
                out.write(values.tobytes())
            if tmp is not None:
                out.close()
                os.replace(tmp, args.output)
        except BaseException:
            if tmp is not None:
                out.close()
                os.unlink(tmp)
            raise
    return 0
