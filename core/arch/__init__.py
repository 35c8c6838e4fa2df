"""Architectures, keyed by `general.architecture` (with aliases): each supplies its config, tensor declaration
and block wiring."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UnsupportedArchitectureError
from ..gguf import GGUFFile, GGUFValueType, Keys
from . import bert, deepseek, gemma3, llama, moe, qwen2, qwen2moe, qwen3, qwen3moe
from .binder import Binder
from .config import ModelConfig
from .layers import embed_tokens, lm_head
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
