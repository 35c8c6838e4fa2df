"""`llamay run -m MODEL -p PROMPT`: generate a continuation and stream it to stdout as it is sampled."""

from __future__ import annotations

import argparse
import sys
import time

from llamay.native.commands import MODEL_HELP_DEFAULT

DEFAULT_N_PREDICT = 256


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="generate text from a prompt, streamed as it is sampled")
    p.add_argument("-m", "--model", help=MODEL_HELP_DEFAULT)
    p.add_argument("-p", "--prompt", required=True, help="the prompt (echoed, then continued)")
    # sampling flags left out take the stored model's PARAMETERs, then llama.cpp's defaults
    p.add_argument("-n", "--n-predict", type=int, help=f"tokens to generate at most (default {DEFAULT_N_PREDICT})")
    p.add_argument("--temp", type=float, help="temperature; 0 or less is greedy (default 0.8)")
    p.add_argument("--top-k", type=int, help="keep the k most likely tokens (0: all; default 40)")
    p.add_argument("--top-p", type=float, help="nucleus sampling mass (1: off; default 0.95)")
    p.add_argument("--min-p", type=float, help="drop tokens below min-p x the best (default 0.05)")
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: random)")
    p.add_argument("-c", "--ctx-size", type=int, default=0, help="context length (default: prompt + n-predict)")
    p.add_argument("-t", "--threads", type=int, default=0, help="kernel threads (default: LLAMAY_THREADS or all)")
    p.add_argument("--backend", default=None, help="kernel backend: numba, wasm, portable (default: the fastest)")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--grammar", metavar="FILE", help="constrain the output to a GBNF grammar (llama.cpp's)")
    only.add_argument("--json-schema", metavar="FILE", help="constrain the output to JSON valid against a schema")
    only.add_argument("--json", action="store_true", help="constrain the output to one JSON object")
    p.set_defaults(func=run)


def constraint(args: argparse.Namespace, tok):
    """The constraint --grammar / --json-schema / --json ask for (None without them)."""
    from pathlib import Path

    from llamay.constraints import ConstraintError, grammar_constraint, json_constraint, json_schema_constraint

    try:
        if args.grammar:
            return grammar_constraint(Path(args.grammar).read_text(encoding="utf-8"), tok)
        if args.json_schema:
            return json_schema_constraint(Path(args.json_schema).read_text(encoding="utf-8"), tok)
    except OSError as e:
        raise ConstraintError(f"cannot read {e.filename}: {e.strerror}") from None
    return json_constraint(tok) if args.json else None


def run(args: argparse.Namespace) -> int:
    from llamay.engine import StopMatcher
    from llamay.errors import LlamayError
    from llamay.generate import generate
    from llamay.native.store import resolve
    from llamay.sampling import Sampler

    r = resolve(args.model, log=lambda msg: print(msg, file=sys.stderr))
    opts = r.options
    n_predict = args.n_predict if args.n_predict is not None else opts.num_predict
    n_predict = DEFAULT_N_PREDICT if n_predict is None or n_predict < 0 else n_predict
    with r.load(args.backend) as model:
        be = model.backend
        threads = args.threads or opts.num_thread
        if threads and hasattr(be, "set_threads"):
            be.set_threads(threads)
        tok = model.tokenizer
        ids = tok.encode(args.prompt)
        if not ids:
            raise LlamayError("the prompt is empty")
        n_ctx = args.ctx_size or opts.num_ctx or min(len(ids) + n_predict, model.cfg.n_ctx_train)
        if len(ids) >= n_ctx:
            raise LlamayError(f"the prompt has {len(ids)} tokens; the context holds {n_ctx}")
        st = model.new_state(n_ctx=n_ctx)
        cfg = opts.sampler_config(temp=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, seed=args.seed)
        sampler = Sampler(cfg, constraint=constraint(args, tok), tokenizer=tok)
        stops = StopMatcher(list(opts.stop))
        out = sys.stdout
        out.write(args.prompt)
        out.flush()
        stream = tok.detokenizer()
        start = time.perf_counter()
        first = None
        n = 0
        for token in generate(model, st, ids, n_predict, sampler):
            first = first or time.perf_counter()
            n += 1
            text = stops.push(stream.push(token))
            if text:
                out.write(text)
                out.flush()
            if stops.stopped:
                break
        out.write(("" if stops.stopped else stops.push(stream.flush()) + stops.flush()) + "\n")
        out.flush()
    end = time.perf_counter()
    if first is not None:
        rate = (n - 1) / (end - first) if n > 1 and end > first else 0.0
        print(f"llamay run: {len(ids)} prompt tokens in {first - start:.2f} s, {n} generated ({rate:.1f} tok/s), "
              f"backend {be.name}", file=sys.stderr)  # fmt: skip
    return 0
