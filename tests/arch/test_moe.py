"""The router of `llamay.arch.moe` against a direct statement of llama.cpp's `build_moe_ffn` routing, and the MoE
architectures' declarations (3-D expert tensors in place of the dense FFN, shared experts where they have them)."""

from __future__ import annotations

import dataclasses
import heapq
import math
import random

import pytest

from llamay.arch import bind_weights, moe
from llamay.errors import ModelError
from llamay.gguf import GGUFFile
from tests.models.tiny import MOE_ARCHES, SPECS, build_tiny


def reference(logits, n, n_exp, k, *, sigmoid=False, norm=False, scale=0.0):
    """Per token: the k experts of largest probability and their weights, as llama.cpp's graph states it."""
    out = []
    for i in range(n):
        row = logits[i * n_exp : (i + 1) * n_exp]
        if sigmoid:
            probs = [1 / (1 + math.exp(-v)) for v in row]
        else:
            z = math.fsum(math.exp(v) for v in row)
            probs = [math.exp(v) / z for v in row]
        top = heapq.nlargest(k, range(n_exp), key=probs.__getitem__)
        ws = [probs[e] for e in top]
        if norm:
            ws = [v / math.fsum(ws) for v in ws]
        if scale:
            ws = [v * scale for v in ws]
        out.append(dict(zip(top, ws, strict=True)))
    return out


@pytest.mark.parametrize("opts", [{}, {"norm": True}, {"sigmoid": True}, {"sigmoid": True, "norm": True, "scale": 2.5}])
def test_route_matches_the_reference(opts):
    rng = random.Random(7)
    n, n_exp, k = 9, 8, 3
    logits = [rng.gauss(0, 2) for _ in range(n * n_exp)]
    p = moe.MoEParams(
        n_expert=n_exp, n_expert_used=k, gating=moe.GATING_SIGMOID if opts.get("sigmoid") else moe.GATING_SOFTMAX,
        norm_w=opts.get("norm", False), w_scale=opts.get("scale", 0.0),
    )  # fmt: skip
    groups = moe.route(logits, n, p)
    want = reference(logits, n, n_exp, k, **opts)
    got = [{} for _ in range(n)]
    for e, (rows, ws) in groups.items():
        assert rows == sorted(rows)  # each expert's rows in batch order: one gathered block per expert
        for r, v in zip(rows, ws, strict=True):
            got[r][e] = v
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        assert all(abs(g[e] - w[e]) < 1e-12 for e in g)
    assert list(groups) == sorted(groups)
    if opts.get("norm") and not opts.get("scale"):
        assert all(abs(sum(g.values()) - 1) < 1e-12 for g in got)


def test_an_expert_no_token_chose_is_not_run():
    p = moe.MoEParams(n_expert=4, n_expert_used=1)
    logits = [0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0]  # two tokens: experts 1 and 3
    assert {e: rows for e, (rows, _) in moe.route(logits, 2, p).items()} == {1: [0], 3: [1]}


@pytest.mark.parametrize("arch", MOE_ARCHES)
def test_moe_layers_bind_experts_in_place_of_the_dense_ffn(arch):
    with GGUFFile.from_buffer(build_tiny(arch).to_bytes(), f"tiny-{arch}.gguf") as f:
        cfg, weights, binder = bind_weights(f, strict=True)
        assert binder.unread() == []
        layer = weights.layers[-1]
        assert layer.ffn is None and layer.moe is not None
        first = weights.layers[0]
        assert (first.moe is None and first.ffn is not None) == (arch == "deepseek")  # its leading dense layer
        assert layer.moe.gate.shape == (cfg.n_embd, cfg.n_ff_exp, cfg.n_expert)
        assert layer.moe.down.shape == (cfg.n_ff_exp, cfg.n_embd, cfg.n_expert)
        assert (layer.moe.shared is not None) == (arch in ("qwen2moe", "deepseek", "granitemoe"))
        assert (layer.moe.shared_gate is not None) == (arch == "qwen2moe")


def test_granitemoe_without_a_shared_width_has_no_shared_expert(monkeypatch):
    spec = SPECS["granitemoe"]
    hparams = tuple(h for h in spec.hparams if h[0] != "expert_shared_feed_forward_length")
    monkeypatch.setitem(SPECS, "granitemoe", dataclasses.replace(spec, hparams=hparams))
    with GGUFFile.from_buffer(build_tiny("granitemoe").to_bytes(), "tiny-granitemoe.gguf") as f:
        cfg, weights, binder = bind_weights(f, strict=True)
        assert cfg.n_ff_shexp == 0 and binder.unread() == []
        assert all(layer.moe is not None and layer.moe.shared is None for layer in weights.layers)
        assert not any("shexp" in name for name in f.tensors)


@pytest.mark.parametrize(("used", "count"), [(5, 4), (0, 4), (2, 0)])
def test_expert_counts_out_of_range_are_refused_at_load(monkeypatch, used, count):
    spec = SPECS["qwen3moe"]
    keys = {"expert_used_count": used, "expert_count": count}
    hparams = tuple((k, keys.get(k, v), t) for k, v, t in spec.hparams)
    monkeypatch.setitem(SPECS, "qwen3moe", dataclasses.replace(spec, hparams=hparams))
    with pytest.raises(
        ModelError, match=rf"'qwen3moe.expert_count' = {count} and 'qwen3moe.expert_used_count' = {used}"
    ):
        build_tiny("qwen3moe")


def test_a_dense_llama_file_allocates_no_expert_scratch():
    from llamay.arch import load_config
    from llamay.kernels import get_backend
    from llamay.model import State

    for name, on in (("llama", False), ("mixtral", True)):
        with GGUFFile.from_buffer(build_tiny(name).to_bytes(), f"{name}.gguf") as f:
            cfg = load_config(f)[1]
        st = State(cfg, get_backend("portable"), n_ctx=16, n_batch=4)
        sizes = {b.name: len(getattr(st.scratch, b.name)) for b in moe.SCRATCH}
        assert (sum(sizes.values()) > 0) == on, (name, sizes)
