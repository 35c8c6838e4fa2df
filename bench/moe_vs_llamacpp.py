"""Decode speed and memory of a mixture-of-experts model: llamay (numba) against llama.cpp (xllamacpp) in the
same run, at 1 and 2 threads.

    python bench/moe_vs_llamacpp.py [--type Q8_0|Q4_0] [--layers 12] [--tokens 64] [--threads 1 2] [--repeats 3]

The model is synthetic, written with gguf-py to a temporary folder: a qwen3moe of realistic shape (n_embd 1024,
16 heads of 64 with 4 KV heads, 8 experts of width 768 with 2 used per token, the routers F32 as llama.cpp's
quantizer leaves them), random weights, the vocabulary of stories260K. Every measurement runs in its own child
process: decode tokens/s over --tokens greedy steps after a short prompt (llama.cpp: its server's own
`predicted_per_second`), and the child's peak resident memory (VmHWM), which for llamay must stay within the
file size + the KV cache + 100 MiB. Targets: llamay/llama.cpp >= 1.0 at each thread count. Beside the peak, each
side's resident memory at its end split into anonymous memory and file pages (llama.cpp maps the file: its
weights are file pages; llamay's repacked weights are anonymous).

A first llamay child, not measured against the targets, loads the model once so that numba's kernel cache is
filled (a one-time compile per machine and kernel source, which `llamay` also does on its first run); its peak is
printed as "first run" (with a cold cache: the compile's memory).

The machine may be shared: the ratio is what counts (both sides run in the same minute), not the absolute rate.
Each side runs --repeats children, alternating (llamay, llama.cpp, llamay, ...), and the ratio is that of the two
medians, every run printed: one run a side swung the 2-thread ratio from 0.9 to 1.3 on this machine (llama.cpp's
own rate went from 136 to 220 tok/s between runs), as llama-bench repeats its runs for the same reason.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM = 1024, 16, 4, 64
N_EXPERT, N_EXPERT_USED, N_FF_EXP = 8, 2, 768
N_CTX = 256
PROMPT = "Once upon a time, there was a little girl named Lily."
TARGET_RATIO = 1.0
RSS_SLACK = 100 * 1024 * 1024
GAIN = 1.5


def write_model(path: Path, type_name: str, n_layer: int, seed: int = 0) -> None:
    """A random qwen3moe, gguf-py's writer and quantizer."""
    import gguf
    import numpy as np

    from llamay.gguf import GGUFFile
    from tests import paths

    rng = np.random.default_rng(seed)
    qtype = gguf.GGMLQuantizationType[type_name]
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_context_length(N_CTX * 16)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(N_FF_EXP * N_EXPERT_USED)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_EXPERT_USED)
    w.add_expert_feed_forward_length(N_FF_EXP)
    with GGUFFile.open(paths.stories("f32")) as vocab:
        n_vocab = len(vocab.get("tokenizer.ggml.tokens"))
        w.add_tokenizer_model(vocab.get("tokenizer.ggml.model"))
        w.add_token_list(list(vocab.get("tokenizer.ggml.tokens")))
        w.add_token_scores(list(vocab.get("tokenizer.ggml.scores")))
        w.add_token_types(list(vocab.get("tokenizer.ggml.token_type")))
        w.add_bos_token_id(int(vocab.get("tokenizer.ggml.bos_token_id")))
        w.add_eos_token_id(int(vocab.get("tokenizer.ggml.eos_token_id")))

    def matrix(name: str, *shape: int, quantize: bool = True) -> None:  # ggml shape, innermost first
        a = (rng.standard_normal(shape[::-1], dtype=np.float32) * (GAIN / np.sqrt(shape[0]))).astype(np.float32)
        if quantize and qtype != gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, a)

    def norm(name: str, dim: int) -> None:
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(dim)).astype(np.float32))

    matrix("token_embd.weight", N_EMBD, n_vocab)
    for i in range(n_layer):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", N_EMBD)
        matrix(p + "attn_q.weight", N_EMBD, N_HEAD * HEAD_DIM)
        matrix(p + "attn_k.weight", N_EMBD, N_HEAD_KV * HEAD_DIM)
        matrix(p + "attn_v.weight", N_EMBD, N_HEAD_KV * HEAD_DIM)
        norm(p + "attn_q_norm.weight", HEAD_DIM)
        norm(p + "attn_k_norm.weight", HEAD_DIM)
        matrix(p + "attn_output.weight", N_HEAD * HEAD_DIM, N_EMBD)
        norm(p + "ffn_norm.weight", N_EMBD)
        matrix(p + "ffn_gate_inp.weight", N_EMBD, N_EXPERT, quantize=False)
        matrix(p + "ffn_gate_exps.weight", N_EMBD, N_FF_EXP, N_EXPERT)
        matrix(p + "ffn_up_exps.weight", N_EMBD, N_FF_EXP, N_EXPERT)
        matrix(p + "ffn_down_exps.weight", N_FF_EXP, N_EMBD, N_EXPERT)
    norm("output_norm.weight", N_EMBD)
    matrix("output.weight", N_EMBD, n_vocab)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def memory() -> dict:
    """The peak resident set (VmHWM) and the resident set now as anonymous memory and file pages, in bytes."""
    fields = {"VmHWM": "rss", "RssAnon": "anon", "RssFile": "file"}
    out = dict.fromkeys(fields.values(), 0)
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in fields:
            out[fields[key]] = int(value.split()[0]) * 1024
    return out


def run_llamay(path: str, threads: int, n_tokens: int) -> dict:
    from llamay.generate import decode_step, prefill
    from llamay.kernels import get_backend
    from llamay.model import load_model

    be = get_backend("numba")
    be.set_threads(threads)
    with load_model(path, be) as m:
        ids = m.tokenizer.encode(PROMPT)
        m.warm_up()
        st = m.new_state(n_ctx=N_CTX)
        prefill(m, st, ids)
        tok = be.argmax(st.logits, 0, m.cfg.n_vocab)
        decode_step(m, st, tok)  # the first decode step of this state outside the timing
        tok = be.argmax(st.logits, 0, m.cfg.n_vocab)
        t0 = time.perf_counter()
        for _ in range(n_tokens):
            decode_step(m, st, tok)
            tok = be.argmax(st.logits, 0, m.cfg.n_vocab)
        dt = time.perf_counter() - t0
        kv = 2 * m.cfg.n_layer * N_CTX * m.cfg.n_embd_k_gqa * 4
        # back-offs: times the thread policy ran small kernels on one thread after stalls (a busy machine)
        return {"tok_s": n_tokens / dt, "kv": kv, "back_offs": be.policy.back_offs, **memory()}


def run_llamacpp(path: str, threads: int, n_tokens: int) -> dict:
    from llamay.native.commands.bench import llamacpp_server

    server = llamacpp_server(path, N_CTX, threads)
    body = {"prompt": PROMPT, "n_predict": n_tokens + 1, "temperature": 0.0, "top_k": 1, "seed": 0,
            "cache_prompt": False, "ignore_eos": True}  # fmt: skip
    server.handle_completions(body)  # warm
    r = server.handle_completions(body)
    timings = r["timings"] if "timings" in r else r.get("choices", [{}])[0].get("timings", {})
    mem = memory()  # with the model still loaded
    del server
    return {"tok_s": float(timings["predicted_per_second"]), **mem}


def mib(r: dict) -> str:
    return f"{r['anon'] / 2**20:.0f} + {r['file'] / 2**20:.0f} MiB"


def child(engine: str, path: str, threads: int, n_tokens: int) -> dict:
    cmd = [sys.executable, __file__, "--child", engine, "--model", path, "--threads", str(threads),
           "--tokens", str(n_tokens)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{engine} at {threads} thread(s) failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--type", default="Q8_0", choices=("Q8_0", "Q4_0"))
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3, help="children a side, alternating; medians compared")
    ap.add_argument("--child", choices=("llamay", "llamacpp"))
    ap.add_argument("--model")
    args = ap.parse_args(argv)
    if args.child:
        run = run_llamay if args.child == "llamay" else run_llamacpp
        print(json.dumps(run(args.model, args.threads[0], args.tokens)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"bench-qwen3moe-{args.type.lower()}.gguf"
        t0 = time.perf_counter()
        write_model(path, args.type, args.layers)
        size = path.stat().st_size
        print(f"# {path.name}: {size / 2**20:.0f} MiB, {args.layers} layers, n_embd {N_EMBD}, {N_EXPERT} experts "
              f"of {N_FF_EXP} ({N_EXPERT_USED} used), written in {time.perf_counter() - t0:.0f} s")  # fmt: skip
        t0 = time.perf_counter()
        first = child("llamay", str(path), args.threads[0], 1)
        print(f"# first run (fills numba's kernel cache if cold, not measured): peak RSS {first['rss'] / 2**20:.0f} "
              f"MiB, {time.perf_counter() - t0:.0f} s")  # fmt: skip
        ok = True
        for n in args.threads:
            runs: dict[str, list[dict]] = {"llamay": [], "llamacpp": []}
            for _ in range(args.repeats):
                for engine, got in runs.items():
                    got.append(child(engine, str(path), n, args.tokens))
            ours, ref = (sorted(r, key=lambda x: x["tok_s"])[(len(r) - 1) // 2] for r in runs.values())  # a median run
            ratio = ours["tok_s"] / ref["tok_s"]
            limit = size + ours["kv"] + RSS_SLACK
            peak = max(r["rss"] for r in runs["llamay"])
            ok &= ratio >= TARGET_RATIO and peak <= limit
            each = "; ".join(f"{e} " + " ".join(f"{r['tok_s']:.0f}" for r in rs) for e, rs in runs.items())
            print(f"threads {n}: llamay {ours['tok_s']:.1f} tok/s (median of {args.repeats}; thread back-offs "
                  f"{sum(r['back_offs'] for r in runs['llamay'])}), llama.cpp {ref['tok_s']:.1f} tok/s, ratio "
                  f"{ratio:.2f} (target >= {TARGET_RATIO}; every run: {each}); peak RSS llamay "
                  f"{peak / 2**20:.0f} MiB (limit {limit / 2**20:.0f} = file + KV + 100), llama.cpp "
                  f"{max(r['rss'] for r in runs['llamacpp']) / 2**20:.0f} MiB; at the end anonymous + file: "
                  f"llamay {mib(ours)}, llama.cpp {mib(ref)}")  # fmt: skip
        print("PASS" if ok else "BELOW TARGET")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
