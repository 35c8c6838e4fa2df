"""Tiny random-weight GGUF models, one per architecture, written by llamay's own GGUF writer.

Each runs in llama.cpp and in llamay, so the two can be compared logit for logit on every block shape the engine
supports (`scripts/goldens/gen_llamacpp_goldens.py` records llama.cpp's side in `tests/goldens/tiny-*.json`).
The weights come from `random.Random(seed)` in a fixed order, so a file is byte-identical on every platform and
Python version: a test rewrites it and checks the sha256 the golden recorded.

The decoders reuse the SentencePiece vocabulary of stories260K (512 tokens), BERT the WordPiece vocabulary of
all-MiniLM-L6-v2 (30,522 tokens; its embedding is kept narrow). Matrices are drawn uniform with standard deviation
`gain / sqrt(n_in)`, norm weights near 1, biases small: activations stay in a sane range and the LM head gives
distributions that are neither flat nor saturated. The LM head's row of EOS is zero, so greedy runs never stop
early. `ggml_type` other than F32 stores the matrices whose rows fit its blocks in that type (through
`llamay.quants.quantize`); norms, biases and BERT's position and token-type embeddings stay F32.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
from array import array
from dataclasses import dataclass
from typing import Any

from llamay import platform
from llamay.arch import load_config
from llamay.arch.tensors import instances
from llamay.ggml_types import GGMLType, block_size
from llamay.gguf import GGUFFile, GGUFValueType, GGUFWriter
from tests import paths

V = GGUFValueType
ARCHES = (
    "llama", "qwen2", "qwen3", "gemma3", "bert", "nomic-bert",
    "gemma", "phi3", "phi2", "gptneox", "stablelm", "falcon", "starcoder2", "olmo", "olmo2", "granite", "command-r",
    "internlm2", "exaone", "smollm3", "mistral3", "gpt2", "starcoder", "gemma2", "mpt", "bloom",
)  # fmt: skip
# decoders with a quantised (Q8_0) golden beside the F32 one: the architectures added with the shared pieces
TINY_QUANTISED = (
    "gemma", "phi3", "phi2", "gptneox", "stablelm", "falcon", "starcoder2", "olmo", "olmo2", "granite", "command-r",
    "internlm2", "exaone", "smollm3", "mistral3", "gpt2", "starcoder", "gemma2", "mpt", "bloom",
)  # fmt: skip
# BERT's position and token-type embeddings stay F32, and so do MoE routers (llama.cpp's quantizer leaves
# ffn_gate_inp alone: a rounded router flips near-tied expert choices)
UNQUANTIZED = frozenset({"token_types", "pos_embd", "moe.router", "moe.shared_gate"})
ROW_MATRICES = frozenset({"moe.shared_gate"})  # 1-D tensors that are a one-row matrix, not a norm's weight

EMBD_GAIN = 2.0  # token embeddings (and the LM head when tied)
HEAD_GAIN = 2.5  # an untied LM head: logits get a standard deviation of about this
PROJ_GAIN = 1.5  # every other matrix
NORM_SPREAD = 0.1  # norm weights 1 ± this (standard deviation)
BIAS_SPREAD = 0.1


RMS_EPS = ("attention.layer_norm_rms_epsilon", 1e-5, V.FLOAT32)
LN_EPS = ("attention.layer_norm_epsilon", 1e-5, V.FLOAT32)
PHI3_TOKENS = ("<|end|>", "<|endoftext|>", "<|user|>", "<|assistant|>")  # llama.cpp's phi3 vocab needs them


def rope_dims(n: int) -> tuple[str, int, GGUFValueType]:
    """Partial rotary: the leading n dimensions of each head rotate."""
    return ("rope.dimension_count", n, V.UINT32)


@dataclass(frozen=True)
class TinySpec:
    """The shape of one tiny model: sizes, and which optional tensors it has (its architecture's declaration
    says which tensors, and which of them are optional)."""

    arch: str
    n_layer: int
    n_embd: int = 64
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16  # written as key_length/value_length when it is not n_embd / n_head
    n_ff: int = 96
    n_ctx: int = 128
    vocab_from: str = "spm"  # "spm": stories260K's tokenizer, "wordpiece": all-MiniLM's
    untied_output: bool = False  # an `output.weight` of its own
    encoder: bool = False  # BERT: no head_count_kv key, no LM head
    embd_gain: float = EMBD_GAIN
    hparams: tuple[tuple[str, Any, GGUFValueType], ...] = ()  # `{arch}.` keys of this architecture alone
    last_tokens: tuple[str, ...] = ()  # texts for the vocabulary's last ids (tokens llama.cpp looks up by name)
    name: str = ""  # the model's name in SPECS when it is not its architecture's (mixtral: a llama file)
    optional_slots: tuple[str, ...] = ()  # other optional tensors it writes (a reranker's classifier head)

    @property
    def optional(self) -> tuple[str, ...]:
        """Slots of the optional declared tensors this model writes."""
        return (("output",) if self.untied_output else ()) + self.optional_slots


SPECS: dict[str, TinySpec] = {
    s.arch: s
    for s in (
        TinySpec(
            "llama",
            n_layer=2,
            hparams=(
                ("rope.dimension_count", 16, V.UINT32),
                ("rope.freq_base", 10000.0, V.FLOAT32),
                ("attention.layer_norm_rms_epsilon", 1e-5, V.FLOAT32),
            ),
        ),
        TinySpec(
            "qwen2",
            n_layer=2,
            untied_output=True,
            hparams=(
                ("rope.freq_base", 1000000.0, V.FLOAT32),
                ("attention.layer_norm_rms_epsilon", 1e-6, V.FLOAT32),
            ),
        ),
        TinySpec(
            "qwen3",
            n_layer=2,
            head_dim=32,  # n_head * head_dim = 128 > n_embd, as in Qwen3
            untied_output=True,
            hparams=(
                ("rope.freq_base", 1000000.0, V.FLOAT32),
                ("attention.layer_norm_rms_epsilon", 1e-6, V.FLOAT32),
            ),
        ),
        TinySpec(
            "gemma3",
            n_layer=6,  # layers 0-4 slide, layer 5 is global
            head_dim=32,  # twice n_embd / n_head, as Gemma's 256-wide heads
            embd_gain=1.0,  # gemma scales embeddings by sqrt(n_embd): larger ones would drown the blocks' output
            hparams=(
                ("rope.freq_base", 1000000.0, V.FLOAT32),
                ("attention.layer_norm_rms_epsilon", 1e-6, V.FLOAT32),
                ("attention.sliding_window", 8, V.UINT32),
            ),
        ),
        TinySpec("gemma", n_layer=2, head_dim=32, embd_gain=1.0, hparams=(RMS_EPS,)),
        TinySpec("phi3", n_layer=2, untied_output=True, hparams=(RMS_EPS,)),
        TinySpec(
            "phi3",
            n_layer=2,
            untied_output=True,
            hparams=(RMS_EPS, ("attention.sliding_window", 8, V.UINT32)),
            last_tokens=PHI3_TOKENS,
        ),
        TinySpec("phi2", n_layer=2, n_head_kv=4, untied_output=True, hparams=(LN_EPS, rope_dims(8))),
        TinySpec(
            "gptneox",
            n_layer=2,
            n_head_kv=4,
            untied_output=True,
            hparams=(LN_EPS, rope_dims(4), ("use_parallel_residual", True, V.BOOL)),
        ),
        TinySpec("stablelm", n_layer=2, n_head_kv=4, untied_output=True, hparams=(LN_EPS, rope_dims(4))),
        TinySpec("falcon", n_layer=2, n_head_kv=1, untied_output=True, hparams=(LN_EPS,)),
        TinySpec("starcoder2", n_layer=2, untied_output=True, hparams=(LN_EPS,)),
        TinySpec("olmo", n_layer=2, untied_output=True, hparams=(LN_EPS,)),
        TinySpec("olmo2", n_layer=2, n_head_kv=4, untied_output=True, hparams=(RMS_EPS,)),
        TinySpec(
            "granite",
            n_layer=2,
            embd_gain=0.5,
            hparams=(
                RMS_EPS,
                ("embedding_scale", 4.0, V.FLOAT32),
                ("residual_scale", 0.5, V.FLOAT32),
                ("attention.scale", 0.125, V.FLOAT32),
                ("logit_scale", 2.0, V.FLOAT32),
            ),
        ),
        TinySpec("command-r", n_layer=2, hparams=(LN_EPS, ("logit_scale", 0.5, V.FLOAT32))),
        TinySpec("internlm2", n_layer=2, untied_output=True, hparams=(RMS_EPS,)),
        TinySpec("exaone", n_layer=2, untied_output=True, hparams=(RMS_EPS,)),
        TinySpec("smollm3", n_layer=4, hparams=(RMS_EPS,)),  # layer 3 has no rotary
        TinySpec("mistral3", n_layer=2, untied_output=True, hparams=(RMS_EPS, ("rope.freq_base", 1e6, V.FLOAT32))),
        TinySpec("gpt2", n_layer=2, n_head_kv=4, hparams=(LN_EPS,)),
        TinySpec("starcoder", n_layer=2, n_head_kv=1, untied_output=True, hparams=(LN_EPS,)),
        TinySpec(
            "gemma2",
            n_layer=2,  # layer 0 slides, layer 1 is global
            head_dim=32,
            embd_gain=1.0,
            hparams=(
                ("rope.freq_base", 10000.0, V.FLOAT32),
                RMS_EPS,
                ("attention.sliding_window", 8, V.UINT32),
                ("attn_logit_softcapping", 1.5, V.FLOAT32),  # caps near the scores' size: tanh bends them
                ("final_logit_softcapping", 4.0, V.FLOAT32),
            ),
        ),
        TinySpec(
            "mpt",
            n_layer=2,
            n_head_kv=4,
            hparams=(LN_EPS, ("attention.max_alibi_bias", 8.0, V.FLOAT32), ("attention.clamp_kqv", 1.0, V.FLOAT32)),
        ),
        TinySpec(
            "bloom", n_layer=2, n_head=6, n_head_kv=6, n_embd=96, untied_output=True, hparams=(LN_EPS,)
        ),  # six heads: ALiBi's two slope series
        TinySpec(
            "nomic-bert",
            n_layer=2,
            n_embd=32,
            n_head=4,
            n_head_kv=4,
            head_dim=8,
            n_ff=64,
            n_ctx=64,
            vocab_from="wordpiece",
            encoder=True,
            hparams=(
                ("attention.layer_norm_epsilon", 1e-12, V.FLOAT32),
                ("attention.causal", False, V.BOOL),
                ("pooling_type", 1, V.UINT32),  # mean
                ("rope.freq_base", 1000.0, V.FLOAT32),
            ),
        ),
        TinySpec(
            "bert",
            n_layer=2,
            n_embd=32,
            n_head=4,
            n_head_kv=4,
            head_dim=8,
            n_ff=64,
            n_ctx=64,
            vocab_from="wordpiece",
            encoder=True,
            hparams=(
                ("attention.layer_norm_epsilon", 1e-12, V.FLOAT32),
                ("attention.causal", False, V.BOOL),
                ("pooling_type", 1, V.UINT32),  # mean
            ),
        ),
    )
}


# mixtures of experts (llamay.arch.moe): 4 experts of width 32, 2 chosen per token
MOE_KEYS = (
    ("expert_count", 4, V.UINT32),
    ("expert_used_count", 2, V.UINT32),
    ("expert_feed_forward_length", 32, V.UINT32),
)
MOE_SPECS = (
    TinySpec(
        "qwen3moe",
        n_layer=2,
        head_dim=32,
        untied_output=True,
        hparams=(
            ("rope.freq_base", 1000000.0, V.FLOAT32),
            ("attention.layer_norm_rms_epsilon", 1e-6, V.FLOAT32),
            *MOE_KEYS,
        ),
    ),
    TinySpec(
        "qwen2moe",
        n_layer=2,
        untied_output=True,
        hparams=(
            ("rope.freq_base", 1000000.0, V.FLOAT32),
            ("attention.layer_norm_rms_epsilon", 1e-6, V.FLOAT32),
            *MOE_KEYS,
            ("expert_shared_feed_forward_length", 64, V.UINT32),
        ),
    ),
    TinySpec(
        "llama",
        name="mixtral",
        n_layer=2,
        hparams=(
            ("rope.dimension_count", 16, V.UINT32),
            ("rope.freq_base", 1000000.0, V.FLOAT32),
            ("attention.layer_norm_rms_epsilon", 1e-5, V.FLOAT32),
            *MOE_KEYS[:2],  # the experts are as wide as feed_forward_length
        ),
    ),
    TinySpec(
        "deepseek",
        n_layer=3,
        untied_output=True,
        hparams=(
            ("rope.dimension_count", 16, V.UINT32),
            ("rope.freq_base", 10000.0, V.FLOAT32),
            ("attention.layer_norm_rms_epsilon", 1e-6, V.FLOAT32),
            *MOE_KEYS,
            ("leading_dense_block_count", 1, V.UINT32),
            ("expert_shared_count", 2, V.UINT32),
            ("expert_weights_scale", 1.5, V.FLOAT32),
        ),
    ),
)
MOE_SPECS += (
    TinySpec(
        "olmoe",
        n_layer=2,
        n_head_kv=4,  # llama.cpp's olmoe K norm is n_embd wide: no grouped-query attention
        untied_output=True,
        hparams=(RMS_EPS, *MOE_KEYS[:2]),  # the experts are as wide as feed_forward_length
    ),
    TinySpec(
        "granitemoe",
        n_layer=2,
        embd_gain=0.5,
        hparams=(
            *SPECS["granite"].hparams,
            *MOE_KEYS[:2],
            ("expert_shared_feed_forward_length", 64, V.UINT32),  # Granite MoE "shared": an ungated shared expert
        ),
    ),
    TinySpec(
        "gpt-oss",
        n_layer=2,  # layer 0 slides, layer 1 is global
        untied_output=True,
        hparams=(
            RMS_EPS,
            ("rope.freq_base", 150000.0, V.FLOAT32),
            ("attention.sliding_window", 8, V.UINT32),
            *MOE_KEYS,
            ("rope.scaling.type", "yarn", V.STRING),  # as the released files: YaRN, here factor 4 over 32 positions
            ("rope.scaling.factor", 4.0, V.FLOAT32),
            ("rope.scaling.original_context_length", 32, V.UINT32),
        ),
    ),
)
SPECS.update((s.name or s.arch, s) for s in MOE_SPECS)
MOE_ARCHES = tuple(s.name or s.arch for s in MOE_SPECS)


def _variant(arch: str, name: str, *keys: tuple[str, Any, GGUFValueType], **kw: Any) -> TinySpec:
    """`arch`'s tiny model with keys added (the same weights where it adds no tensor)."""
    spec = SPECS[arch]
    return dataclasses.replace(spec, name=name, hparams=(*spec.hparams, *keys), **kw)


# rotary scaling (llamay.arch.rope). YaRN with factor 4 moves most pairs to the interpolated angle and grows cos
# and sin by 1 + 0.1 ln 4; an original context of 16, below the prompt, makes LongRoPE take its long factors
# (both in llama.cpp, whose context is at least 256, and here); "-short" keeps an original context above both.
YARN = (("rope.scaling.type", "yarn", V.STRING), ("rope.scaling.factor", 4.0, V.FLOAT32))
LINEAR = ("rope.scaling.type", "linear", V.STRING)
LONGROPE = ("rope_long", "rope_short")
LONGROPE_ATTN = ("rope.scaling.attn_factor", 1.19, V.FLOAT32)  # as phi3's converter writes it


def _orig_ctx(n: int) -> tuple[str, int, GGUFValueType]:
    return ("rope.scaling.original_context_length", n, V.UINT32)


ROPE_SPECS = (
    _variant("llama", "llama-yarn", *YARN),  # the original context defaults to the trained one (128)
    _variant("qwen2", "qwen2-yarn", *YARN, _orig_ctx(32), ("rope.scaling.attn_factor", 0.9, V.FLOAT32)),
    _variant("llama", "llama-linear", LINEAR, ("rope.scaling.factor", 2.0, V.FLOAT32)),
    _variant("gemma3", "gemma3-linear", LINEAR, ("rope.scaling.factor", 8.0, V.FLOAT32)),  # sliding layers unscaled
    _variant("phi3", "phi3-longrope", _orig_ctx(16), LONGROPE_ATTN, optional_slots=LONGROPE),
    _variant("phi3", "phi3-longrope-short", _orig_ctx(4096), LONGROPE_ATTN, optional_slots=LONGROPE),
    _variant("llama", "llama-ropefreqs", optional_slots=("rope_freqs",)),  # llama 3.1's per-pair divisors
)
# olmo with Q, K and V clamped (attention.clamp_kqv): at 1.0 a good share of the projections are cut
CLAMP_SPECS = (_variant("olmo", "olmo-clamp", ("attention.clamp_kqv", 1.0, V.FLOAT32)),)
SPECS.update((s.name, s) for s in ROPE_SPECS + CLAMP_SPECS)
ROPE_ARCHES = tuple(s.name for s in ROPE_SPECS)
VARIANT_ARCHES = ROPE_ARCHES + tuple(s.name for s in CLAMP_SPECS)  # an architecture's model with keys added
FACTOR_SLOTS = frozenset({"rope_freqs", *LONGROPE})  # per-frequency divisors: drawn in [1, FACTOR_MAX]
FACTOR_MAX = 8.0
# their quantised variants with goldens: every MoE model in Q8_0, and qwen3moe and gpt-oss in MXFP4 (gpt-oss's
# expert type)
MOE_VARIANTS = (*((a, GGMLType.Q8_0) for a in MOE_ARCHES), ("qwen3moe", GGMLType.MXFP4), ("gpt-oss", GGMLType.MXFP4))
ARCHES += MOE_ARCHES + VARIANT_ARCHES
TINY_QUANTISED += VARIANT_ARCHES


def vocab_source(spec: TinySpec) -> str:
    return os.fspath(paths.MINILM if spec.vocab_from == "wordpiece" else paths.stories("f32"))


class _Weights:
    """Draws the tensors in the order they are added, from one seeded stream."""

    def __init__(self, w: GGUFWriter, seed: int, ggml_type: GGMLType) -> None:
        self.w = w
        self.rng = random.Random(seed)
        self.ggml_type = GGMLType(ggml_type)

    def _uniform(self, n: int, mean: float, std: float) -> array:
        a = std * math.sqrt(3.0)  # U(-a, a) has this standard deviation
        r = self.rng.random
        return array("f", [mean + a * (2.0 * r() - 1.0) for _ in range(n)])

    def _add(self, name: str, shape: tuple[int, ...], values: array, quantize: bool) -> None:
        t = self.ggml_type if quantize and shape[0] % block_size(self.ggml_type) == 0 else GGMLType.F32
        if t == GGMLType.F32:
            if not platform.LITTLE_ENDIAN:
                values.byteswap()
            data = values.tobytes()
        else:
            from llamay.quants import quantize as quantize_values

            data = quantize_values(t, values)
        self.w.add_tensor(name, t, shape, data)

    def matrix(
        self, name: str, shape: tuple[int, ...], gain: float = PROJ_GAIN, *, quantize: bool = True, zero_rows=()
    ) -> None:
        """A weight matrix, ggml shape (n_in, n_out), a stack of them (n_in, n_out, n_expert: an MoE layer's
        experts) or one row (n_in,); stored as the chosen type when its rows allow."""
        n_in = shape[0]
        values = self._uniform(math.prod(shape), 0.0, gain / math.sqrt(n_in))
        for row in zero_rows:
            values[row * n_in : (row + 1) * n_in] = array("f", bytes(4 * n_in))
        self._add(name, shape, values, quantize)

    def norm(self, name: str, dim: int, bias: bool = False) -> None:
        self._add(f"{name}.weight", (dim,), self._uniform(dim, 1.0, NORM_SPREAD), False)
        if bias:
            self.bias(name, dim)

    def bias(self, name: str, *shape: int) -> None:
        """A bias vector, or one per expert (n_out, n_expert: gpt-oss)."""
        self._add(f"{name}.bias", shape, self._uniform(math.prod(shape), 0.0, BIAS_SPREAD), False)

    def factors(self, name: str, dim: int) -> None:
        """Rotary frequency divisors, uniform in [1, FACTOR_MAX]."""
        half = (FACTOR_MAX - 1.0) / 2.0
        self._add(name, (dim,), self._uniform(dim, 1.0 + half, half / math.sqrt(3.0)), False)


def _metadata(w: GGUFWriter, spec: TinySpec, vocab: GGUFFile, ggml_type: GGMLType) -> None:
    a = spec.arch
    w.add("general.architecture", a)
    w.add("general.name", f"llamay tiny {a} ({GGMLType(ggml_type).name})")
    w.add(f"{a}.context_length", spec.n_ctx, V.UINT32)
    w.add(f"{a}.embedding_length", spec.n_embd, V.UINT32)
    w.add(f"{a}.block_count", spec.n_layer, V.UINT32)
    w.add(f"{a}.feed_forward_length", spec.n_ff, V.UINT32)
    w.add(f"{a}.attention.head_count", spec.n_head, V.UINT32)
    if not spec.encoder:
        w.add(f"{a}.attention.head_count_kv", spec.n_head_kv, V.UINT32)
    if spec.head_dim != spec.n_embd // spec.n_head:
        w.add(f"{a}.attention.key_length", spec.head_dim, V.UINT32)
        w.add(f"{a}.attention.value_length", spec.head_dim, V.UINT32)
    for key, value, vtype in spec.hparams:
        w.add(f"{a}.{key}", value, vtype)
    for fld in vocab.fields.values():
        if fld.key == "tokenizer.ggml.tokens" and spec.last_tokens:
            texts = list(fld.value)
            texts[len(texts) - len(spec.last_tokens) :] = spec.last_tokens
            w.add(fld.key, texts, fld.type)
        elif fld.key.startswith("tokenizer."):
            w.add(fld.key, fld.value, fld.type)


def build_tiny(arch: str, seed: int = 0, ggml_type: GGMLType = GGMLType.F32) -> GGUFWriter:
    """A writer holding the tiny model of `arch` (see `SPECS`), weights drawn from `seed`: the tensors its
    architecture declares (`llamay.arch.tensors`), the optional ones only when the spec asks."""
    spec = SPECS.get(arch)
    if spec is None:
        raise ValueError(f"no tiny model for architecture {arch!r}; known: {', '.join(ARCHES)}")
    w = GGUFWriter()
    with GGUFFile.open(vocab_source(spec)) as vocab:
        _metadata(w, spec, vocab, ggml_type)
        # a zero LM-head row gives EOS a logit of 0, never the greedy pick: generation runs its full length
        eos = () if spec.encoder else (int(vocab.get("tokenizer.ggml.eos_token_id")),)
    with GGUFFile.from_buffer(w.to_bytes(), f"tiny-{arch}.gguf") as f:
        architecture, cfg = load_config(f)  # the shapes, as the binder will read them
    # llama's family reads "tied" from the LM head's absence, which this file is about to decide
    cfg = dataclasses.replace(cfg, tied_output=cfg.tied_output and not spec.untied_output)
    x = _Weights(w, seed, ggml_type)
    for d, _bid, name in instances(architecture.tensors, cfg):
        if d.fill is not None or (not d.required and d.slot not in spec.optional):  # constants are not stored
            continue
        shape = d.dims(cfg)
        if name.endswith(".bias"):
            x.bias(name.removesuffix(".bias"), *shape)
        elif d.slot in FACTOR_SLOTS:
            x.factors(name, *shape)
        elif len(shape) == 1 and d.slot not in ROW_MATRICES:
            x.norm(name.removesuffix(".weight"), *shape)
        else:
            gain = {"token_embd": spec.embd_gain, "output": HEAD_GAIN}.get(d.slot, PROJ_GAIN)
            zero_rows = eos if d.slot == ("output" if spec.untied_output else "token_embd") else ()
            x.matrix(name, shape, gain, quantize=d.slot not in UNQUANTIZED, zero_rows=zero_rows)
    return w


def write_tiny(arch: str, path: str | os.PathLike[str], seed: int = 0, ggml_type: GGMLType = GGMLType.F32) -> None:
    """Write the tiny random-weight model of `arch` to `path` (byte-identical for the same arguments)."""
    build_tiny(arch, seed, ggml_type).write(path)
