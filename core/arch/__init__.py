"""Architectures, keyed by `general.architecture` (with aliases): each supplies its config, tensor declaration
and block wiring."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UnsupportedArchitectureError
from ..gguf import GGUFFile, GGUFValueType, Keys
from . import (
    bert,
    command_r,
    deepseek,
    falcon,
    gemma,
    gemma2,
    gemma3,
    gpt2,
    gpt_oss,
    gptneox,
    granite,
    granitemoe,
    llama,
    llama_like,
    moe,
    mpt,
    nomic_bert,
    olmo,
    olmo2,
    olmoe,
    phi2,
    phi3,
    qwen2,
    qwen2moe,
    qwen3,
    qwen3moe,
    stablelm,
    starcoder2,
)
from .binder import Binder
from .blocks import embed_norm, embed_positions, parallel, sequential
from .config import ModelConfig
from .layers import embed_tokens, lm_head
from .refused import refusal
from .scratch import BUFFERS
from .tensors import Declaration
from .weights import ModelWeights, bind_declared


@dataclass(frozen=True)
class Architecture:
    """An architecture: its config reader, tensor declaration and block wiring (embed → blocks → output)."""

    name: str
    summary: str
    config: Callable[[GGUFFile, str], ModelConfig]
    tensors: Declaration  # every tensor its files hold (`tensors.py`): what the binder reads
    block: Callable  # (Pass, LayerWeights, layer index) -> None
    embed: Callable = embed_tokens  # (Pass) -> None: fills x
    output: Callable = lm_head  # (Pass) -> None: logits (decoders) or the pooled embedding (encoders)
    scratch: BUFFERS = ()  # buffers its layers need beyond the shared activations (`scratch.py`)


ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in (
        Architecture(
            "llama",
            "Llama, Mistral, TinyLlama, SmolLM, llama2.c stories; Mixtral-style experts",
            llama.config,
            llama.TENSORS,
            llama.block,
            scratch=moe.SCRATCH,  # sized 0 without experts
        ),
        Architecture("qwen2", "Qwen2 / Qwen2.5 (QKV biases)", qwen2.config, qwen2.TENSORS, llama.block),
        Architecture("qwen3", "Qwen3 dense (QK-norm)", qwen3.config, qwen3.TENSORS, llama.block),
        Architecture(
            "gemma3", "Gemma 3 text (QK-norm, sliding window, GeGLU)", gemma3.config, gemma3.TENSORS, gemma3.block
        ),
        Architecture("gemma", "Gemma 1 (GeGLU, scaled embeddings)", gemma.config, gemma.TENSORS, sequential),
        Architecture("phi3", "Phi-3, Phi-4 (fused QKV and gate/up)", phi3.config, phi3.TENSORS, sequential),
        Architecture("phi2", "Phi-2 (parallel block, partial rotary, biases)", phi2.config, phi2.TENSORS, parallel),
        Architecture(
            "gptneox",
            "GPT-NeoX, Pythia (parallel residual, partial rotary)",
            gptneox.config,
            gptneox.TENSORS,
            gptneox.block,
        ),
        Architecture(
            "stablelm", "StableLM 2, StableLM-3B (partial rotary)", stablelm.config, stablelm.TENSORS, sequential
        ),
        Architecture(
            "falcon", "Falcon-7B style (parallel block, multi-query)", falcon.config, falcon.TENSORS, parallel
        ),
        Architecture("starcoder2", "StarCoder2 (LayerNorm, biases)", starcoder2.config, starcoder2.TENSORS, sequential),
        Architecture("olmo", "OLMo 1 (LayerNorms without weights)", olmo.config, olmo.TENSORS, sequential),
        Architecture("olmo2", "OLMo 2 (output norms, full-width QK-norm)", olmo2.config, olmo2.TENSORS, sequential),
        Architecture("granite", "IBM Granite 3 dense (scale multipliers)", granite.config, granite.TENSORS, sequential),
        Architecture(
            "command-r",
            "Cohere Command-R (parallel block, logit scale)",
            command_r.config,
            command_r.TENSORS,
            command_r.block,
        ),
        Architecture("internlm2", "InternLM2", llama_like.internlm2_config, llama_like.TENSORS, sequential),
        Architecture(
            "exaone", "EXAONE 3 (NeoX rotary)", llama_like.exaone_config, llama_like.TENSORS_ROPE_FREQS, sequential
        ),
        Architecture(
            "smollm3",
            "SmolLM3 (NoPE every fourth layer)",
            llama_like.smollm3_config,
            llama_like.TENSORS_ROPE_FREQS,
            sequential,
        ),
        Architecture(
            "mistral3", "Mistral Small 3 text", llama_like.mistral3_config, llama_like.TENSORS_ROPE_FREQS, sequential
        ),
        Architecture(
            "gpt2", "GPT-2 (learned positions, fused QKV)", gpt2.config, gpt2.TENSORS, sequential, embed=embed_positions
        ),
        Architecture(
            "starcoder",
            "StarCoder 1, SantaCoder (learned positions)",
            gpt2.config,
            gpt2.TENSORS,
            sequential,
            embed=embed_positions,
        ),
        Architecture(
            "gemma2",
            "Gemma 2 (soft-capped attention and logits, sliding window every other layer)",
            gemma2.config,
            gemma2.TENSORS,
            sequential,
        ),
        Architecture("mpt", "MPT (ALiBi, fused QKV, no biases)", mpt.config, mpt.TENSORS, sequential),
        Architecture(
            "bloom",
            "BLOOM (ALiBi, embedding norm, biases)",
            mpt.bloom_config,
            mpt.BLOOM_TENSORS,
            sequential,
            embed=embed_norm,
        ),
        Architecture(
            "bert",
            "BERT encoders for embeddings (all-MiniLM, bge)",
            bert.config,
            bert.TENSORS,
            bert.block,
            embed=bert.embed,
            output=bert.output,
            scratch=bert.SCRATCH,
        ),
        Architecture(
            "nomic-bert",
            "nomic-embed-text encoders (rotary, SwiGLU, fused QKV)",
            nomic_bert.config,
            nomic_bert.TENSORS,
            bert.block,
            embed=bert.embed,
            output=bert.output,
            scratch=bert.SCRATCH,
        ),
        # mixtures of experts (moe.py)
        Architecture(
            "qwen3moe",
            "Qwen3 MoE (QK-norm, routed experts)",
            qwen3moe.config,
            qwen3moe.TENSORS,
            llama.block,
            scratch=moe.SCRATCH,
        ),
        Architecture(
            "qwen2moe",
            "Qwen1.5 / Qwen2 MoE (routed experts, gated shared expert)",
            qwen2moe.config,
            qwen2moe.TENSORS,
            llama.block,
            scratch=moe.SCRATCH,
        ),
        Architecture(
            "deepseek",
            "DeepSeek-MoE V1 (leading dense layers, shared experts)",
            deepseek.config,
            deepseek.TENSORS,
            llama.block,
            scratch=moe.SCRATCH,
        ),
        Architecture(
            "olmoe",
            "OLMoE (full-width QK-norm, routed experts)",
            olmoe.config,
            olmoe.TENSORS,
            sequential,
            scratch=moe.SCRATCH,
        ),
        Architecture(
            "granitemoe",
            "IBM Granite 3 MoE (scale multipliers, routed experts, optional shared expert)",
            granitemoe.config,
            granitemoe.TENSORS,
            sequential,
            scratch=moe.SCRATCH,
        ),
        Architecture(
            "gpt-oss",
            "OpenAI gpt-oss (attention sinks, sliding window every other layer, biased experts, clamped SwiGLU)",
            gpt_oss.config,
            gpt_oss.TENSORS,
            sequential,
            scratch=moe.SCRATCH,
        ),
    )
}

# Other spellings of the same block shape seen in GGUF files.
ALIASES: dict[str, str] = {
    "mistral": "llama",
    "llama2": "llama",
    "gemma3_text": "gemma3",
}


def supported() -> list[str]:
    return sorted(ARCHITECTURES) + sorted(f"{a} (= {t})" for a, t in ALIASES.items())


def get_architecture(name: str | None, where: str = "") -> Architecture:
    """The architecture for a `general.architecture` value, or a refusal listing what works."""
    place = f"{where}: " if where else ""
    if name is None:
        raise UnsupportedArchitectureError(f"{place}metadata key {Keys.ARCHITECTURE!r} is missing")
    arch = ARCHITECTURES.get(ALIASES.get(name, name))
    if arch is None and refusal(name) is not None:
        raise UnsupportedArchitectureError(
            f"{place}architecture {name!r} is {refusal(name)}; it is refused, not half-loaded. "
            f"Supported: {', '.join(supported())}"
        )
    if arch is None:
        raise UnsupportedArchitectureError(
            f"{place}architecture {name!r} is not supported; supported: {', '.join(supported())}"
        )
    return arch


def load_config(f: GGUFFile) -> tuple[Architecture, ModelConfig]:
    """The architecture and its checked hyper-parameters (see `meta.Meta`)."""
    fld = f.fields.get(Keys.ARCHITECTURE)
    if fld is not None and fld.type != GGUFValueType.STRING:
        raise UnsupportedArchitectureError(f"{f.name}: key {Keys.ARCHITECTURE!r} = {fld.shown()}: must be a STRING")
    arch = get_architecture(f.architecture, f.name)
    return arch, arch.config(f, f.architecture)


def bind_weights(
    f: GGUFFile, runnable_types: frozenset | None = None, *, strict: bool = False
) -> tuple[ModelConfig, ModelWeights, Binder]:
    """Config and bound weights of a supported model, after checking the file's layers are the block count.
    The binder's `unread()` is the tensor audit; `strict` (a load) refuses any unread tensor."""
    arch, cfg = load_config(f)
    binder = Binder(f, runnable_types)
    binder.check_layers(f.architecture, cfg.n_layer)
    weights = bind_declared(binder, arch.tensors, cfg)
    if strict:
        binder.check_all_read(f.architecture)
    return cfg, weights, binder
