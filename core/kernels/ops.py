"""The kernel ops, declared once: each op's name, its arguments in order with their kinds, and the wasm
module's export that runs it.

Everything else is made from or checked against this table:
- the interface (`interface.Backend`) and every backend declare a method per op with these parameters, in this
  order (tests/kernels/test_ops.py);
- the wasm side: `wasm/runtime.py` derives `SIGNATURES` and the op codes of `llamay_exec` (`OPS`) from it, and
  `wasm/build.py` generates the C side from it (the `LLAMAY_OP_*` enum, the exports' prototypes and
  `llamay_exec`'s dispatch, wasm/codegen.py), so that a C definition that disagrees does not compile;
- the numba and wasm backends call the kernel of an op whose arguments are all plain (buffers and numbers)
  without a method of their own (`PLAIN`).

Kinds are the interface's annotations: `Buf` / `IBuf` (a float32 / int32 buffer of the backend), `int`, `float`,
`bool`, `Weight`, `Weight | None`, `BatchView`, `Experts` (a tuple of Weights: an MoE layer's matrices, one per
expert). An export is its C prototype: pointers and `int32_t` are one i32
word of a command, `float` an f32 word, `double` two.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

PLAIN = frozenset({"Buf", "IBuf", "int", "float", "bool"})  # kinds a backend passes to its kernel as they are
KINDS = PLAIN | {"Weight", "Weight | None", "BatchView", "Experts"}
EXPORT_PREFIX = "llamay_"
_PROTOTYPE = re.compile(r"(?P<result>\w+) (?P<name>\w+)\((?P<params>.*)\)")
_C_PARAM = re.compile(r"(?P<type>(const )?\w+( \*)?) ?(?P<name>\w+)")
C_WORDS = {"int32_t": "i", "float": "f", "double": "d"}  # a C scalar's SIGNATURES letter; pointers are "i"


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # an interface annotation (KINDS), or a C type for an export's parameter


@dataclass(frozen=True)
class Export:
    """A wasm export: `result llamay_<name>(params)`, parsed from its C prototype."""

    prototype: str
    result: str  # its C result type: void or int32_t
    name: str
    params: tuple[Param, ...]

    @property
    def letters(self) -> tuple[str, str]:
        """(result, parameters) as `runtime.SIGNATURES` spells them: i = i32, f = f32, d = f64, v = none."""
        return ("v" if self.result == "void" else C_WORDS[self.result]), "".join(map(c_letter, self.params))


@dataclass(frozen=True)
class Op:
    name: str
    params: tuple[Param, ...]  # the interface method's, after self
    result: str  # the interface method's result annotation
    export: Export | None  # None: the wasm backend runs it through another op's export

    @property
    def plain(self) -> bool:
        """All arguments pass to the kernels as they are (no weight to unwrap, no batch to spread)."""
        return all(p.kind in PLAIN for p in self.params)

    def method_signature(self) -> inspect.Signature:
        """(self, *params): the signature of a backend's method for this op."""
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        names = ["self"] + [p.name for p in self.params]
        return inspect.Signature([inspect.Parameter(name, kind) for name in names])


def c_letter(p: Param) -> str:
    if p.kind.endswith("*"):
        return "i"
    if p.kind not in C_WORDS:
        raise ValueError(f"C parameter {p.name}: type {p.kind!r} is not one a command word holds")
    return C_WORDS[p.kind]


def parse_export(prototype: str) -> Export:
    m = _PROTOTYPE.fullmatch(prototype)
    if m is None:
        raise ValueError(f"not a C prototype: {prototype!r}")
    params = []
    for text in m["params"].split(", "):
        pm = _C_PARAM.fullmatch(text)
        if pm is None:
            raise ValueError(f"{m['name']}: not a C parameter: {text!r}")
        params.append(Param(pm["name"], pm["type"]))
    return Export(prototype, m["result"], m["name"], tuple(params))


def op(name: str, params: str, export: str | None, result: str = "None") -> Op:
    """An op from its interface parameters ("out: Buf, n: int") and its export's C prototype."""
    ps = []
    for text in params.split(", "):
        pname, kind = text.split(": ")
        if kind not in KINDS:
            raise ValueError(f"{name}.{pname}: unknown kind {kind!r}")
        ps.append(Param(pname, kind))
    ex = parse_export(export) if export is not None else None
    if ex is not None and ex.name != EXPORT_PREFIX + name:
        raise ValueError(f"{name}: its export is named {ex.name}")
    return Op(name, tuple(ps), result, ex)


OPS: tuple[Op, ...] = (
    op("get_rows", "out: Buf, w: Weight, ids: IBuf, n: int",
       "int32_t llamay_get_rows(int32_t type, float *out, const uint8_t *w, const int32_t *ids, int32_t n, "
       "int32_t k, int32_t m)"),
    op("matmul", "out: Buf, w: Weight, x: Buf, n: int",
       "int32_t llamay_matmul(int32_t type, float *out, const uint8_t *w, const float *x, int32_t n, int32_t k, "
       "int32_t m, uint8_t *scratch)"),
    # one input by the three attention projections (one rounding of x, one parallel loop over all their rows)
    op("qkv", "q: Buf, k: Buf, v: Buf, wq: Weight, wk: Weight, wv: Weight, x: Buf, n: int", None),
    op("add_bias", "x: Buf, b: Weight, n: int",
       "void llamay_add_bias(float *x, const float *b, int32_t n, int32_t dim)"),
    op("rms_norm", "out: Buf, x: Buf, w: Weight | None, n: int, dim: int, eps: float",
       "void llamay_rms_norm(float *out, const float *x, const float *w, int32_t n, int32_t dim, double eps)"),
    op("layer_norm", "out: Buf, x: Buf, w: Weight, b: Weight | None, n: int, dim: int, eps: float",
       "void llamay_layer_norm(float *out, const float *x, const float *w, const float *b, int32_t n, "
       "int32_t dim, double eps)"),
    op("head_rms_norm", "x: Buf, w: Weight, n: int, n_heads: int, head_dim: int, eps: float", None),
    op("rope", "x: Buf, pos: IBuf, n: int, n_heads: int, head_dim: int, n_rot: int, base: float, scale: float, "
       "neox: bool, freq_factors: Weight | None, ext_factor: float, mscale: float, corr_low: float, corr_high: float",
       "void llamay_rope(float *x, const int32_t *pos, int32_t n, int32_t n_heads, int32_t head_dim, "
       "int32_t n_rot, float theta_scale, double scale, int32_t neox, const float *freq, float ext_factor, "
       "float mscale, float corr_low, float corr_high)"),
    op("scale", "x: Buf, s: float, count: int", "void llamay_scale(float *x, double s, int32_t count)"),
    op("add", "out: Buf, a: Buf, b: Buf, count: int",
       "void llamay_add(float *out, const float *a, const float *b, int32_t count)"),
    op("swiglu", "out: Buf, gate: Buf, up: Buf, count: int",
       "void llamay_swiglu(float *out, const float *gate, const float *up, int32_t count)"),
    op("swiglu_oai", "out: Buf, gate: Buf, up: Buf, count: int, alpha: float, limit: float",
       "void llamay_swiglu_oai(float *out, const float *gate, const float *up, int32_t count, double alpha, "
       "double limit)"),
    op("geglu", "out: Buf, gate: Buf, up: Buf, count: int",
       "void llamay_geglu(float *out, const float *gate, const float *up, int32_t count, const float *table)"),
    op("gelu", "x: Buf, count: int", "void llamay_gelu(float *x, int32_t count, const float *table)"),
    op("softcap", "x: Buf, cap: float, count: int", "void llamay_softcap(float *x, double cap, int32_t count)"),
    op("kv_store", "cache: Buf, layer: int, n_slots: int, slots: IBuf, src: Buf, n: int, dim: int",
       "void llamay_kv_store(float *cache, int32_t layer, int32_t n_slots, const int32_t *slots, const float *src, "
       "int32_t n, int32_t dim)"),
    op("attention", "out: Buf, q: Buf, k_cache: Buf, v_cache: Buf, layer: int, n_slots: int, batch: BatchView, "
       "n_head: int, n_head_kv: int, head_dim: int, head_dim_v: int, kq_scale: float, causal: bool, window: int, "
       "softcap: float, max_bias: float, sinks: Weight | None",
       "void llamay_attention(float *out, const float *q, const float *k_cache, const float *v_cache, "
       "int32_t layer, int32_t n_slots, int32_t n, const int32_t *pos, const int32_t *seq, const int32_t *pages, "
       "const int32_t *page_off, const int32_t *seq_len, int32_t page_size, int32_t n_head, int32_t n_head_kv, "
       "int32_t head_dim, int32_t head_dim_v, float kq_scale, int32_t causal, int32_t window, float softcap, "
       "float max_bias, const float *sinks)"),
    op("argmax", "x: Buf, offset: int, n: int", "int32_t llamay_argmax(const float *x, int32_t n)", "int"),
    op("top_k", "x: Buf, offset: int, n: int, k: int",
       "int32_t llamay_top_k(const float *x, int32_t n, int32_t k, int32_t *idx, float *val)",
       "list[tuple[int, float]]"),
    op("mean_pool", "out: Buf, x: Buf, n: int, dim: int",
       "void llamay_mean_pool(float *out, const float *x, int32_t n, int32_t dim)"),
    op("l2_normalize", "x: Buf, dim: int", "void llamay_l2_normalize(float *x, int32_t dim)"),
    # mixture of experts (core/arch/moe.py): the rows routed to one expert, gathered, and its output added back
    op("gather_rows", "out: Buf, x: Buf, rows: IBuf, n: int, dim: int",
       "void llamay_gather_rows(float *out, const float *x, const int32_t *rows, int32_t n, int32_t dim)"),
    op("add_rows_scaled", "out: Buf, x: Buf, rows: IBuf, scales: Buf, n: int, dim: int",
       "void llamay_add_rows_scaled(float *out, const float *x, const int32_t *rows, const float *scales, int32_t n, "
       "int32_t dim)"),
    # one token's router in one call (decode): its logits, the chosen experts and their weights (compose.moe_route)
    op("moe_route", "ids: IBuf, weights: Buf, logits: Buf, router: Weight, x: Buf, k: int, gating: int, "
       "norm_w: bool, w_scale: float", None),
    # one token's chosen experts in one call (decode): wasm runs it as the matmuls and row kernels above
    op("moe_experts", "out: Buf, gate: Experts, up: Experts, down: Experts, x: Buf, ids: IBuf, weights: Buf, k: int, "
       "h: Buf, y: Buf", None),
    # clamped Q, K and V (olmo's attention.clamp_kqv, ggml_clamp)
    op("clamp", "x: Buf, lo: float, hi: float, count: int",
       "void llamay_clamp(float *x, double lo, double hi, int32_t count)"),
    # constraints (core/constraints/kernel_engine.py): the grammar automaton and its token masks over flat tables
    op("pda", "vocab: IBuf, arena: IBuf", "int32_t llamay_pda(const int32_t *vocab, int32_t *arena)", "int"),
)  # fmt: skip
BY_NAME: dict[str, Op] = {o.name: o for o in OPS}
