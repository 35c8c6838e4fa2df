"""The invariants every backend must keep, checked on a real model (`llamay verify`):

1. batched prefill gives the same logits as token-by-token decode, on each backend;
2. every backend gives the same logits as `portable` (the definition) on the same tokens;
3. a prompt whose prefix comes from the prefix cache gives the same logits as a cold run;
4. sequences decoded together in one batch give the same logits as each decoded alone.

Logits are compared as log-probabilities over the reference's top tokens, where generation reads them.
Encoders compare their pooled embeddings by cosine similarity.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .gguf import GGUFFile
from .model import Model, forward
from .model.forward import begin
from .sampling import log_softmax

VERIFY_TEXT = (
    "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village by the sea, "
    "there lived an old fisherman who told stories to the children every evening."
)
TOP = 20  # log-probabilities compared: the reference's most likely tokens
# Tolerances on |Δ logprob| over the top tokens. Batched vs sequential runs identical arithmetic per row;
# across backends only the float summation order differs.
TOL_SAME_BACKEND = 1e-3
TOL_BACKENDS_FLOAT = 5e-3
# Quantised weights: every matmul rounds its activations to 8 bits, so a one-ulp difference can move a value to
# the next level, and over many layers such moves compound (on SmolLM2 the fast backends and portable end up
# ~0.3 apart in logprob, as far as llama.cpp's own prefill and decode paths are from each other). The
# cross-backend check therefore feeds each block the reference's input and bounds what one block changes.
TOL_BLOCK_REL = 1e-2  # relative L2 error of one block's output (a few level moves in a row of hundreds)
TOL_HEAD_QUANT = 1e-2  # logprobs from the same final hidden state
MIN_COSINE = 0.99999


@dataclass
class Check:
    name: str
    measured: float
    limit: float
    passed: bool
    detail: str = ""


def _logprob_diff(got: list[float], want: list[float]) -> float:
    lg, lw = log_softmax(got), log_softmax(want)
    top = sorted(range(len(lw)), key=lw.__getitem__, reverse=True)[:TOP]
    return max(abs(lg[t] - lw[t]) for t in top)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)) or 1.0)


def batched_logits(model: Model, tokens: Sequence[int]) -> list[list[float]]:
    """Logits of every position from one batched forward."""
    st = model.new_state(n_ctx=len(tokens) + 1, n_batch=len(tokens), n_outputs=len(tokens))
    n = forward(model, st, tokens, outputs=range(len(tokens)))
    v = model.cfg.n_vocab
    return [model.backend.read_f32(st.logits, i * v, v) for i in range(n)]


def sequential_logits(model: Model, tokens: Sequence[int]) -> list[list[float]]:
    """Logits of every position, feeding one token per forward."""
    st = model.new_state(n_ctx=len(tokens) + 1, n_batch=1)
    out = []
    for t in tokens:
        forward(model, st, (t,))
        out.append(model.backend.read_f32(st.logits, 0, model.cfg.n_vocab))
    return out


def prefix_reuse_diff(model: Model, tokens: Sequence[int]) -> float:
    """Compute a prefix in one sequence, cache it, then the whole prompt in another sequence that adopts the
    cached prefix: its logits must equal a cold run's."""
    n = len(tokens)
    st = model.new_state(n_ctx=n + 1, n_batch=n, n_seq=2, prefix_cache=True, page_size=4)
    a = st.kv.acquire()
    forward(model, st, tokens[: n // 2 + 1], [a] * (n // 2 + 1))
    st.kv.release(a)
    b = st.kv.acquire()
    reused = st.kv.reuse_prefix(b, list(tokens))
    if reused == 0:
        return float("inf")
    forward(model, st, tokens[reused:], [b] * (n - reused))
    warm = model.backend.read_f32(st.logits, 0, model.cfg.n_vocab)
    return _logprob_diff(warm, batched_logits(model, tokens)[-1])


def batched_decode_diff(model: Model, prompts: Sequence[Sequence[int]], steps: int = 3) -> float:
    """Several sequences prefilled and decoded in shared batches, against each one run alone."""
    v = model.cfg.n_vocab
    flat = [t for p in prompts for t in p]
    n_ctx = max(map(len, prompts)) + steps + 1
    st = model.new_state(n_ctx=n_ctx, n_batch=len(flat), n_seq=len(prompts), n_outputs=len(prompts))
    for _ in range(1, len(prompts)):
        st.kv.acquire()
    seqs = [s for s, p in enumerate(prompts) for _ in p]
    forward(model, st, flat, seqs)
    together = [[] for _ in prompts]
    for _ in range(steps):
        rows = [model.backend.read_f32(st.logits, s * v, v) for s in range(len(prompts))]
        nxt = [max(range(v), key=r.__getitem__) for r in rows]
        for s, r in enumerate(rows):
            together[s].append((r, nxt[s]))
        forward(model, st, nxt, list(range(len(prompts))))
    worst = 0.0
    for s, p in enumerate(prompts):
        alone = model.new_state(n_ctx=len(p) + steps + 1)
        forward(model, alone, p)
        for r, t in together[s]:
            worst = max(worst, _logprob_diff(r, model.backend.read_f32(alone.logits, 0, v)))
            forward(model, alone, (t,))
    return worst


def _rel_rows(got: list[float], want: list[float], dim: int) -> float:
    """The largest relative L2 error over rows of two (rows, dim) buffers."""
    worst = 0.0
    for r in range(0, len(want), dim):
        num = sum((a - b) ** 2 for a, b in zip(got[r : r + dim], want[r : r + dim], strict=True))
        den = sum(b * b for b in want[r : r + dim]) or 1.0
        worst = max(worst, math.sqrt(num / den))
    return worst


@dataclass
class Trace:
    """What the reference computes on some tokens, block by block: its hidden state after the embedding and after
    each block, and its head's logits. It does not depend on the backend compared against it: computed once."""

    tokens: list[int]
    states: list[array]
    logits: list[float]


def reference_trace(ref: Model, tokens: Sequence[int]) -> Trace:
    n, e = len(tokens), ref.cfg.n_embd
    st = ref.new_state(n_ctx=n + 1, n_batch=n)
    p = begin(ref, st, tokens)
    ref.arch.embed(p)
    states = [array("f", ref.backend.read_f32(st.x, 0, n * e))]
    for il, layer in enumerate(ref.weights.layers):
        ref.arch.block(p, layer, il)
        states.append(array("f", ref.backend.read_f32(st.x, 0, n * e)))
    ref.arch.output(p)
    return Trace(list(tokens), states, ref.backend.read_f32(st.logits, 0, ref.cfg.n_vocab))


def layerwise_diff(ref: Trace, test: Model) -> tuple[float, float]:
    """Run `test` beside the reference's trace, feeding each of its blocks the hidden state the reference computed:
    the largest relative error of a block's output, and the logprob difference of the head given the same final
    state.

    Quantised models round activations to 8 bits, so over many layers one-ulp differences can move a value to the
    next level and compound; fed the same input, each block can only differ by its own roundings."""
    n, e = len(ref.tokens), test.cfg.n_embd
    st = test.new_state(n_ctx=n + 1, n_batch=n)
    p = begin(test, st, ref.tokens)
    test.arch.embed(p)

    def sync(want: array) -> float:
        err = _rel_rows(test.backend.read_f32(st.x, 0, n * e), want, e)
        test.backend.write_f32(st.x, want)
        return err

    worst = sync(ref.states[0])
    for il, layer in enumerate(test.weights.layers):
        test.arch.block(p, layer, il)
        worst = max(worst, sync(ref.states[il + 1]))
    test.arch.output(p)
    head = _logprob_diff(test.backend.read_f32(st.logits, 0, test.cfg.n_vocab), ref.logits)
    return worst, head


def pooled(model: Model, tokens: Sequence[int]) -> list[float]:
    st = model.new_state(n_ctx=len(tokens), n_batch=len(tokens))
    forward(model, st, tokens, outputs=())
    return model.backend.read_f32(st.scratch.pooled, 0, model.cfg.n_embd)


def is_quantized_model(model: Model) -> bool:
    """Whether some matrix rounds its activations before the dot products (to 8-bit quants, bf16 or f16: every
    type but F32): then one-ulp differences can move whole rounding steps, and backends are compared block by
    block (measured on stories260K end to end: f16 0.009, bf16 0.023, against 2e-4 for f32)."""
    from .ggml_types import GGMLType

    return any(w.type != GGMLType.F32 for w in model.file.tensors.values() if len(w.shape) > 1)


def verify(
    f: GGUFFile,
    backends: Sequence[str],
    n_tokens: int = 16,
    n_tokens_portable: int = 16,
    log: Callable[[str], None] = print,
) -> list[Check]:
    """Run both invariants on `f` for each backend; `portable` is the reference for the second."""
    checks: list[Check] = []
    ref = Model(f, "portable")
    tokens = ref.tokenizer.encode(VERIFY_TEXT)[:n_tokens]
    quant = is_quantized_model(ref)
    tol_backends = TOL_BACKENDS_FLOAT
    encoder = not ref.cfg.causal
    mode = "matmuls round activations" if quant else "float32 weights"
    log(f"verify {f.name}: {ref.cfg.arch}, {mode}, {len(tokens)} tokens")
    ref_out = None
    trace = None
    if n_tokens_portable > 0 and (encoder or not quant):
        short = tokens[:n_tokens_portable]
        ref_out = pooled(ref, short) if encoder else batched_logits(ref, short)
    elif n_tokens_portable > 0 and set(backends) - {"portable"}:
        # quantised: each backend compared block by block against portable's trace (computed once)
        trace = reference_trace(ref, tokens[:n_tokens_portable])
    for name in backends:
        model = ref if name == "portable" else Model(f, name)
        if encoder:
            emb = pooled(model, tokens)
            if ref_out is not None and name != "portable":
                got = pooled(model, tokens[:n_tokens_portable])
                cos = _cosine(got, ref_out)
                checks.append(Check(f"{name} == portable (embedding cosine)", cos, MIN_COSINE, cos >= MIN_COSINE))
            checks.append(Check(f"{name}: embedding is unit length", _cosine(emb, emb), MIN_COSINE, True))
            continue
        batched = batched_logits(model, tokens)
        seq = sequential_logits(model, tokens)
        diff = max(_logprob_diff(b, s) for b, s in zip(batched, seq, strict=True))
        checks.append(
            Check(f"{name}: batched prefill == token-by-token decode", diff, TOL_SAME_BACKEND, diff <= TOL_SAME_BACKEND)
        )
        diff = prefix_reuse_diff(model, tokens)
        checks.append(Check(f"{name}: prefix-cache reuse == cold", diff, TOL_SAME_BACKEND, diff <= TOL_SAME_BACKEND))
        prompts = [tokens, tokens[: len(tokens) // 2], tokens[len(tokens) // 3 :]]
        diff = batched_decode_diff(model, prompts)
        checks.append(
            Check(f"{name}: {len(prompts)} sequences decoded together == alone", diff, TOL_SAME_BACKEND,
                  diff <= TOL_SAME_BACKEND)
        )  # fmt: skip
        if trace is not None and name != "portable":
            block, head = layerwise_diff(trace, model)
            checks.append(Check(f"{name} == portable, block by block", block, TOL_BLOCK_REL, block <= TOL_BLOCK_REL))
            checks.append(Check(f"{name} == portable, LM head", head, TOL_HEAD_QUANT, head <= TOL_HEAD_QUANT))
        elif ref_out is not None and name != "portable":
            short = batched[: len(ref_out)]
            diff = max(_logprob_diff(b, r) for b, r in zip(short, ref_out, strict=True))
            checks.append(
                Check(f"{name} == portable ({len(ref_out)} positions)", diff, tol_backends, diff <= tol_backends)
            )
    return checks
