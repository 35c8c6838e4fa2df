"""`nomic-bert` (nomic-embed-text): BERT's post-norm encoder with rotary positions (NeoX) instead of learned
ones, one fused QKV matrix, SwiGLU, no biases but the LayerNorms'; pooled as the file declares."""

from __future__ import annotations

from dataclasses import dataclass

from ..gguf import GGUFFile, Keys
from .bert import TOKEN_TYPE_COUNT
from .config import POOLING_TYPES, ModelConfig, Norm, Pooling, Rope
from .family import decoder_config
from .meta import MAX_VOCAB
from .names import T
from .params import key
from .tensors import QKV_PIECES, TOKEN_EMBD, norm_w, w

NO_RANK = max(k for k, v in POOLING_TYPES.items() if v != Pooling.RANK)


@dataclass(frozen=True)
class Params:
    # up to last: rank pooling needs a classifier head, which nomic-bert files do not declare
    pooling: Pooling = key(Keys.POOLING_TYPE, "int", 1, lo=0, hi=NO_RANK, convert=POOLING_TYPES.get)
    causal: bool = key(Keys.CAUSAL, "bool", False)
    n_token_types: int = key(TOKEN_TYPE_COUNT, "int", 2, hi=MAX_VOCAB)


def config(f: GGUFFile, arch: str = "nomic-bert") -> ModelConfig:
    return decoder_config(
        f, arch, norm=Norm.LAYER, rope=Rope.NEOX, params=Params, tied_output=False,
        causal=lambda m, c, p: p.causal,
    )  # fmt: skip


TENSORS = (
    TOKEN_EMBD,
    w(T.TOKEN_TYPES, "n_embd", "n_token_types", slot="token_types"),
    *norm_w(T.TOKEN_EMBD_NORM, "embd_norm", with_bias=True),
    w(T.ATTN_QKV, "n_embd", "n_qkv", slot="attn.q", split=QKV_PIECES),
    w(T.ATTN_OUT, "n_o", "n_embd", slot="attn.o"),
    *norm_w(T.ATTN_OUT_NORM, "attn_out_norm", with_bias=True),
    w(T.FFN_UP, "n_embd", "n_ff", slot="ffn.up"),
    w(T.FFN_GATE, "n_embd", "n_ff", slot="ffn.gate"),
    w(T.FFN_DOWN, "n_ff", "n_embd", slot="ffn.down"),
    *norm_w(T.LAYER_OUT_NORM, "layer_out_norm", with_bias=True),
)
