"""Architectures llama.cpp runs and this engine refuses at load, each with the reason: their blocks are not a
transformer's attention over a KV cache (state-space and recurrent models), or need pieces not built here
(multi-head latent attention, an encoder-decoder, vision towers). A file of one is refused by name before any
tensor is read, never half-loaded."""

from __future__ import annotations

SSM = "a state-space model (selective scan and a recurrent state, no attention KV cache)"
RECURRENT = "a recurrent model (RWKV time mixing with a per-sequence state, no attention KV cache)"
HYBRID = "a hybrid of attention and state-space layers (the state-space layers are not built)"

REFUSED: dict[str, str] = {
    "mamba": SSM,
    "mamba2": SSM,
    "rwkv6": RECURRENT,
    "rwkv6qwen2": RECURRENT,
    "rwkv7": RECURRENT,
    "arwkv7": RECURRENT,
    "jamba": HYBRID,
    "falcon-h1": HYBRID,
    "granitehybrid": HYBRID,
    "nemotron_h": HYBRID,
    "deepseek2": "multi-head latent attention (compressed KV projections) is not built",
    "t5": "an encoder-decoder (cross-attention over an encoder's output) is not built",
    "t5encoder": "a T5 encoder (relative position buckets) is not built",
    "clip": "a vision tower or multimodal projector (mmproj) file, not a language model",
    "mllama": "a vision-language model with cross-attention layers, not built",
}


def refusal(name: str) -> str | None:
    """Why `name` is refused, or None if it is not a known refused architecture."""
    return REFUSED.get(name)
