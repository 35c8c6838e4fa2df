"""Mixture of experts: the router, the experts' FFN and the shared expert, as llama.cpp's `build_moe_ffn` computes
them, for every MoE architecture's block to wire (`feed_forward` picks it on the layers that have it).

Per token the router's logits (n_expert) become probabilities (softmax or sigmoid), the top `n_expert_used` are
chosen, their probabilities are the weights (optionally renormalised to sum to one, optionally scaled), and the
output is the weighted sum of the chosen experts' SwiGLU FFNs. Routing runs on the host (a few floats per token;
`kernels.compose.route`, which a decode step's one `moe_route` op runs in a kernel where the backend has one);
the experts run grouped, llama.cpp's MUL_MAT_ID idea: for each expert some token chose, the batch rows routed to it
are gathered into one block, its three matmuls run over that block, and its weighted output is added back to those
rows. This reuses the backends' matmul over an expert's matrix (a zero-copy slice of the 3-D tensor,
`model._experts`): a matmul over k gathered rows is the same kernel, with the same threading and activation
rounding, as any other k-row matmul, so a dedicated MUL_MAT_ID kernel would only save the gather copy (n_embd
floats per routed row, against n_embd · n_ff_exp multiply-adds per row in the matmuls). A decode step (one row)
reads only the weights of its chosen experts, all in one `moe_experts` call: there the per-expert calls, not the
copies, were the cost (16 backend calls a layer, each its own parallel loop and activation rounding).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..errors import ModelError
from ..kernels import compose
from ..kernels.compose import GATING_SIGMOID, GATING_SOFTMAX, GATING_SOFTMAX_WEIGHT  # noqa: F401 (the arches' names)
from .layers import Pass, ffn
from .meta import MAX_DIM
from .names import T
from .params import key
from .scratch import Buffer
from .tensors import Declaration, TensorDecl, b, w
from .weights import LayerWeights, MoEWeights

EXPERT_COUNT = "{arch}.expert_count"
EXPERT_USED_COUNT = "{arch}.expert_used_count"
EXPERT_FF_LENGTH = "{arch}.expert_feed_forward_length"
EXPERT_SHARED_FF_LENGTH = "{arch}.expert_shared_feed_forward_length"
EXPERT_SHARED_COUNT = "{arch}.expert_shared_count"
EXPERT_WEIGHTS_SCALE = "{arch}.expert_weights_scale"
EXPERT_WEIGHTS_NORM = "{arch}.expert_weights_norm"
EXPERT_GATING_FUNC = "{arch}.expert_gating_func"
LEADING_DENSE_BLOCK_COUNT = "{arch}.leading_dense_block_count"

MAX_EXPERTS = 512  # llama.cpp's LLAMA_MAX_EXPERTS


@dataclass(frozen=True)
class MoEParams:
    """The router's and experts' hyper-parameters; an MoE architecture's Params derives from this and sets its
    constants (`norm_w`: llama.cpp renormalises the chosen weights for qwen3moe and Mixtral, not for qwen2moe)."""

    n_expert: int = key(EXPERT_COUNT, "int", 0, lo=0, hi=MAX_EXPERTS)
    n_expert_used: int = key(EXPERT_USED_COUNT, "int", 0, lo=0, hi=MAX_EXPERTS)
    n_ff_exp: int = key(EXPERT_FF_LENGTH, "int", 0, lo=0, hi=MAX_DIM)  # 0: the dense feed_forward_length
    n_ff_shexp: int = key(EXPERT_SHARED_FF_LENGTH, "int", 0, lo=0, hi=MAX_DIM)
    gating: int = GATING_SOFTMAX
    norm_w: bool = False
    w_scale: float = 0.0  # 0 or 1: unscaled
    swiglu_alpha: float = 0.0  # with swiglu_limit > 0, the experts' activation is swiglu_oai (gpt-oss)
    swiglu_limit: float = 0.0  # 0: plain SwiGLU

    @property
    def moe_on(self) -> int:
        return 1 if self.n_expert else 0

    @property
    def n_ff_moe(self) -> int:
        """Width of the experts' (and the shared expert's) hidden activations: the scratch they share."""
        return max(self.n_ff_exp, self.n_ff_shexp) * self.moe_on


def check(params: MoEParams, where: str, arch: str) -> MoEParams:
    """The expert counts a file must give for its MoE layers to run (llama.cpp asserts the same)."""
    if params.n_expert == 0 or not 0 < params.n_expert_used <= params.n_expert:
        raise ModelError(
            f"{where}: {EXPERT_COUNT.format(arch=arch)!r} = {params.n_expert} and "
            f"{EXPERT_USED_COUNT.format(arch=arch)!r} = {params.n_expert_used}: an MoE layer needs at least one "
            "expert, and from 1 to expert_count of them used per token"
        )
    return params


def with_ff_exp(params: MoEParams, n_ff: int) -> MoEParams:
    """The params with the experts' width defaulted to the dense width (Mixtral files give only that)."""
    return params if params.n_ff_exp else dataclasses.replace(params, n_ff_exp=n_ff)


# -- tensors ------------------------------------------------------------------------------------------------


def moe_tensors(*, shared: bool = False, shared_gate: bool = False, biases: bool = False, **kw: Any) -> Declaration:
    """The router and the experts (and the shared expert) of an MoE layer, in gguf-py's order; `biases`: the
    router's and each expert matrix's (gpt-oss; an expert bias is (n_out, n_expert)); `kw`: TensorDecl's
    `layers=` or `when=` where only some layers or files have them."""
    decls = [
        w(T.FFN_GATE_INP, "n_embd", "n_expert", slot="moe.router", **kw),
        w(T.FFN_GATE_EXPS, "n_embd", "n_ff_exp", "n_expert", slot="moe.gate", **kw),
        w(T.FFN_DOWN_EXPS, "n_ff_exp", "n_embd", "n_expert", slot="moe.down", **kw),
        w(T.FFN_UP_EXPS, "n_embd", "n_ff_exp", "n_expert", slot="moe.up", **kw),
    ]
    if biases:
        decls += [
            b(T.FFN_GATE_INP, "n_expert", slot="moe.router_bias", **kw),
            b(T.FFN_GATE_EXPS, "n_ff_exp", "n_expert", slot="moe.gate_bias", **kw),
            b(T.FFN_DOWN_EXPS, "n_embd", "n_expert", slot="moe.down_bias", **kw),
            b(T.FFN_UP_EXPS, "n_ff_exp", "n_expert", slot="moe.up_bias", **kw),
        ]
    return (*decls, *(shared_tensors(gate=shared_gate, **kw) if shared else ()))


def shared_tensors(*, gate: bool = False, **kw: Any) -> Declaration:
    """The shared expert's FFN (and its sigmoid gate, `gate`); `kw` as `moe_tensors`' (granitemoe's are there
    only when the file gives the shared width)."""
    decls = [w(T.FFN_GATE_INP_SHEXP, "n_embd", slot="moe.shared_gate", **kw)] if gate else []
    decls += [
        w(T.FFN_GATE_SHEXP, "n_embd", "n_ff_shexp", slot="moe.shared.gate", **kw),
        w(T.FFN_DOWN_SHEXP, "n_ff_shexp", "n_embd", slot="moe.shared.down", **kw),
        w(T.FFN_UP_SHEXP, "n_embd", "n_ff_shexp", slot="moe.shared.up", **kw),
    ]
    return tuple(decls)


def replace_ffn(block: Declaration, moe: Declaration, **dense: Any) -> Declaration:
    """A decoder block's declaration with its dense FFN matrices replaced by `moe` (right after the FFN norm),
    or kept where `dense` (TensorDecl's `layers=` or `when=`) says: deepseek's leading dense layers, a llama
    file without experts."""
    out: list[TensorDecl] = []
    for d in block:
        if d.slot.startswith("ffn."):
            if dense:
                out.append(dataclasses.replace(d, **dense))
            continue
        out.append(d)
        if d.slot == "ffn_norm.weight":
            out += moe
    return tuple(out)


def has_shared(cfg: Any) -> bool:
    return cfg.n_ff_shexp > 0


def has_experts(cfg: Any) -> bool:
    return cfg.n_expert > 0


def dense(cfg: Any) -> bool:
    return cfg.n_expert == 0


# -- scratch ------------------------------------------------------------------------------------------------

# sized 0 for a file without experts ("moe_on": llama is either)
SCRATCH = (
    Buffer("moe_logits", "f32", ("n_batch", "n_expert"), "the router's logits, (n, n_expert)"),
    Buffer("moe_rows", "i32", ("n_batch", "moe_on"), "the batch rows routed to one expert"),
    Buffer("moe_scales", "f32", ("n_batch", "moe_on"), "their weights"),
    Buffer("moe_x", "f32", ("n_batch", "n_embd", "moe_on"), "those rows of the FFN input, gathered"),
    Buffer("moe_a", "f32", ("n_batch", "n_ff_moe"), "gate activations"),
    Buffer("moe_b", "f32", ("n_batch", "n_ff_moe"), "up activations"),
    Buffer("moe_y", "f32", ("n_batch", "n_embd", "moe_on"), "the expert's output rows"),
    Buffer("moe_ids", "i32", ("n_expert_used",), "one token's chosen experts (moe_experts)"),
    Buffer("moe_weights", "f32", ("n_expert_used",), "their weights"),
    Buffer("moe_h", "f32", (2, "n_expert_used", "n_ff_exp"), "their gate and up activations"),
)


# -- forward ------------------------------------------------------------------------------------------------


def route(logits: list[float], n: int, p: MoEParams) -> dict[int, tuple[list[int], list[float]]]:
    """expert → (batch rows that chose it, their weights), experts in id order. Ties go to the lower expert id."""
    n_exp, k = p.n_expert, p.n_expert_used
    groups: dict[int, tuple[list[int], list[float]]] = {}
    for i in range(n):
        chosen, weights = compose.route(logits[i * n_exp : (i + 1) * n_exp], k, p.gating, p.norm_w, p.w_scale)
        for e, v in zip(chosen, weights, strict=True):
            rows, scales = groups.setdefault(e, ([], []))
            rows.append(i)
            scales.append(v)
    return dict(sorted(groups.items()))


def moe_ffn(p: Pass, m: MoEWeights, inp: Any, out: Any) -> None:
    """out (n, n_embd) = the mixture of experts of inp (n, n_embd), plus the (gated) shared expert."""
    be, cfg, sc, n = p.be, p.cfg, p.st.scratch, p.n
    pm = cfg.params
    if n == 1 and m.router_bias is None and m.up_bias is None and not pm.swiglu_limit:  # decode: two ops
        k = pm.n_expert_used
        be.moe_route(sc.moe_ids, sc.moe_weights, sc.moe_logits, m.router, inp, k, pm.gating, pm.norm_w, pm.w_scale)
        be.moe_experts(out, m.gate, m.up, m.down, inp, sc.moe_ids, sc.moe_weights, k, sc.moe_h, sc.moe_y)
        if m.shared is not None:
            shared_expert(p, m, inp, out)
        return
    e, f = cfg.n_embd, pm.n_ff_exp
    be.matmul(sc.moe_logits, m.router, inp, n)  # (n, n_expert)
    if m.router_bias is not None:
        be.add_bias(sc.moe_logits, m.router_bias, n)
    groups = route(be.read_f32(sc.moe_logits, 0, n * cfg.n_expert), n, pm)
    be.scale(out, 0.0, n * e)
    for expert, (rows, scales) in groups.items():
        k = len(rows)
        be.write_i32(sc.moe_rows, rows)
        be.write_f32(sc.moe_scales, scales)
        be.gather_rows(sc.moe_x, inp, sc.moe_rows, k, e)  # (k, n_embd)
        be.matmul(sc.moe_a, m.gate[expert], sc.moe_x, k)  # (k, n_ff_exp)
        be.matmul(sc.moe_b, m.up[expert], sc.moe_x, k)
        if m.up_bias is not None:  # gpt-oss: a bias per expert on each of its matrices
            be.add_bias(sc.moe_a, m.gate_bias[expert], k)
            be.add_bias(sc.moe_b, m.up_bias[expert], k)
        if pm.swiglu_limit:
            be.swiglu_oai(sc.moe_a, sc.moe_a, sc.moe_b, k * f, pm.swiglu_alpha, pm.swiglu_limit)
        else:
            be.swiglu(sc.moe_a, sc.moe_a, sc.moe_b, k * f)
        be.matmul(sc.moe_y, m.down[expert], sc.moe_a, k)  # (k, n_embd)
        if m.down_bias is not None:
            be.add_bias(sc.moe_y, m.down_bias[expert], k)
        be.add_rows_scaled(out, sc.moe_y, sc.moe_rows, sc.moe_scales, k, e)
    if m.shared is not None:
        shared_expert(p, m, inp, out)


def shared_expert(p: Pass, m: MoEWeights, inp: Any, out: Any) -> None:
    """out += shared expert of inp (every row), times sigmoid(shared_gate · inp) where the layer has that gate."""
    be, cfg, sc, n = p.be, p.cfg, p.st.scratch, p.n
    e, f = cfg.n_embd, cfg.n_ff_shexp
    be.matmul(sc.moe_a, m.shared.gate, inp, n)  # (n, n_ff_shexp)
    be.matmul(sc.moe_b, m.shared.up, inp, n)
    be.swiglu(sc.moe_a, sc.moe_a, sc.moe_b, n * f)
    be.matmul(sc.moe_y, m.shared.down, sc.moe_a, n)  # (n, n_embd)
    if m.shared_gate is not None:
        be.matmul(sc.moe_logits, m.shared_gate, inp, n)  # (n, 1)
        scales = [1.0 / (1.0 + math.exp(-v)) for v in be.read_f32(sc.moe_logits, 0, n)]
    else:
        scales = [1.0] * n
    be.write_i32(sc.moe_rows, list(range(n)))
    be.write_f32(sc.moe_scales, scales)
    be.add_rows_scaled(out, sc.moe_y, sc.moe_rows, sc.moe_scales, n, e)


def feed_forward(p: Pass, layer: LayerWeights, inp: Any, out: Any) -> None:
    """The layer's FFN: its mixture of experts where it has one, else the dense FFN."""
    if layer.moe is not None:
        moe_ffn(p, layer.moe, inp, out)
    else:
        ffn(p, layer.ffn, inp, out)
