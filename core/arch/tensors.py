"""Which tensors an architecture's files hold, declared once (as gguf-py's MODEL_TENSORS, with shapes): the
binder reads them by this declaration, the audit reports what it leaves out, the tests' tiny-model writer writes
exactly it. Each entry names the tensor as the file spells it (`names.T`), its shape in ModelConfig terms (a
dimension is an int or the name of a config attribute, the architecture's params included), the field of the
weight structures it fills (`slot`, a dotted path: "attn.q", "attn_norm.weight"), and when it is there.

A declaration is a flat tuple in file order: entries before the first block tensor, then every block's tensors
(`{bid}` names, layer by layer), then the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .config import ModelConfig
from .names import T, bias, weight


@dataclass(frozen=True)
class TensorDecl:
    name: str  # "blk.{bid}.attn_q.weight"
    shape: tuple[int | str, ...]  # ggml order, innermost first; str: a ModelConfig attribute
    slot: str  # where it goes in ModelWeights (or LayerWeights for a block tensor)
    required: bool = True
    vocab: bool = False  # one row per token: its row count is checked against the vocabulary
    when: Callable[[ModelConfig], bool] | None = None  # present only for some configs (an untied LM head)
    layers: Callable[[ModelConfig, int], bool] | None = None  # a block tensor held by some layers only
    split: tuple[tuple[str, int | str], ...] = ()  # a fused tensor: (slot, size) of each piece, outermost dim
    fill: float | None = None  # not in the file: a constant vector of this value (olmo's weightless norms)

    @property
    def slots(self) -> tuple[str, ...]:
        """The weight-structure fields it fills: its slot, or one per piece of a fused tensor."""
        return tuple(s for s, _ in self.split) or (self.slot,)

    def pieces(self, cfg: ModelConfig) -> list[tuple[str, int]]:
        return [(s, d if isinstance(d, int) else getattr(cfg, d)) for s, d in self.split]

    @property
    def per_layer(self) -> bool:
        return "{bid}" in self.name

    def dims(self, cfg: ModelConfig) -> tuple[int, ...]:
        return tuple(d if isinstance(d, int) else getattr(cfg, d) for d in self.shape)

    def applies(self, cfg: ModelConfig, bid: int | None = None) -> bool:
        """Whether a file of this config has (or may have, if optional) this tensor at layer `bid`."""
        if self.when is not None and not self.when(cfg):
            return False
        return bid is None or self.layers is None or self.layers(cfg, bid)


Declaration = tuple[TensorDecl, ...]


def instances(decls: Declaration, cfg: ModelConfig) -> Iterator[tuple[TensorDecl, int | None, str]]:
    """(declaration, layer or None, tensor name) of every tensor a file of this config may hold, in file
    order (those whose `when` or `layers` excludes them left out)."""
    blocks = [d for d in decls if d.per_layer]
    first = next((i for i, d in enumerate(decls) if d.per_layer), len(decls))
    for i, d in enumerate(decls):
        if i == first:
            for bid in range(cfg.n_layer):
                for b in blocks:
                    if b.applies(cfg, bid):
                        yield b, bid, b.name.format(bid=bid)
        if not d.per_layer and d.applies(cfg):
            yield d, None, d.name


# -- the shared vocabulary ----------------------------------------------------------------------------------


def w(name: str, *shape: int | str, slot: str, **kw) -> TensorDecl:
    """`NAME.weight`."""
    return TensorDecl(weight(name), shape, slot, **kw)


def b(name: str, *shape: int | str, slot: str, **kw) -> TensorDecl:
    """`NAME.bias`."""
    return TensorDecl(bias(name), shape, slot, **kw)


def norm_w(name: str, slot: str, dim: int | str = "n_embd", *, with_bias: bool = False, **kw) -> Declaration:
    """A norm's weight (and its bias, LayerNorm), filling NormWeights at `slot`."""
    ws = (w(name, dim, slot=f"{slot}.weight", **kw),)
    return ws + ((b(name, dim, slot=f"{slot}.bias", **kw),) if with_bias else ())


def constant(name: str, slot: str, value: float, dim: int | str = "n_embd") -> TensorDecl:
    """A vector the file does not hold, given as a constant: a LayerNorm without weights is one whose weights
    are all 1 (olmo)."""
    return TensorDecl(weight(name), (dim,), slot, required=False, fill=value)


def untied(cfg: ModelConfig) -> bool:
    return not cfg.tied_output


TOKEN_EMBD = w(T.TOKEN_EMBD, "n_embd", "n_vocab", slot="token_embd", vocab=True)
OUTPUT_NORM = norm_w(T.OUTPUT_NORM, "output_norm")
OUTPUT = w(T.OUTPUT, "n_embd", "n_vocab", slot="output", vocab=True, required=False, when=untied)  # else tied


QKV_PIECES = (("attn.q", "n_q"), ("attn.k", "n_embd_k_gqa"), ("attn.v", "n_embd_v_gqa"))
QKV_BIAS_PIECES = (("attn.q_bias", "n_q"), ("attn.k_bias", "n_embd_k_gqa"), ("attn.v_bias", "n_embd_v_gqa"))
GATE_UP_PIECES = (("ffn.gate", "n_ff"), ("ffn.up", "n_ff"))  # phi3's ffn_up: the gate's rows, then the up's


def decoder_block(
    *,
    qkv_bias: bool = False,
    qk_norm: bool = False,
    post_norms: bool = False,
    fused_qkv: bool = False,
    o_bias: bool = False,
    norm_bias: bool = False,
    pre_norms: bool = True,
    ffn_norm: bool = True,
    gated: bool = True,
    fused_gate_up: bool = False,
    ffn_bias: bool = False,
    qk_norm_dim: str = "head_dim",
) -> Declaration:
    """A decoder block (llama and its descendants), with the optional pieces some families add: biases, fused
    QKV or gate/up matrices, LayerNorm biases, QK-norm (per head, or over the full width: `qk_norm_dim`), norms
    on the outputs (`post_norms`), no pre-norms (olmo2), one norm for a parallel block (`ffn_norm=False`)."""
    if fused_qkv:
        attn = [w(T.ATTN_QKV, "n_embd", "n_qkv", slot="attn.q", split=QKV_PIECES)]
        if qkv_bias:
            attn.append(b(T.ATTN_QKV, "n_qkv", slot="attn.q_bias", split=QKV_BIAS_PIECES))
    else:
        attn = [
            w(T.ATTN_Q, "n_embd", "n_q", slot="attn.q"),
            w(T.ATTN_K, "n_embd", "n_embd_k_gqa", slot="attn.k"),
            w(T.ATTN_V, "n_embd", "n_embd_v_gqa", slot="attn.v"),
        ]
        if qkv_bias:
            attn += [
                b(T.ATTN_Q, "n_q", slot="attn.q_bias"),
                b(T.ATTN_K, "n_embd_k_gqa", slot="attn.k_bias"),
                b(T.ATTN_V, "n_embd_v_gqa", slot="attn.v_bias"),
            ]
    if qk_norm:
        k_dim = "head_dim" if qk_norm_dim == "head_dim" else "n_embd_k_gqa"
        attn += [*norm_w(T.ATTN_Q_NORM, "attn.q_norm", qk_norm_dim), *norm_w(T.ATTN_K_NORM, "attn.k_norm", k_dim)]
    attn.append(w(T.ATTN_OUT, "n_o", "n_embd", slot="attn.o"))
    if o_bias:
        attn.append(b(T.ATTN_OUT, "n_embd", slot="attn.o_bias"))
    if fused_gate_up:
        ffn = [w(T.FFN_UP, "n_embd", "n_ff_gate_up", slot="ffn.gate", split=GATE_UP_PIECES)]
    else:
        ffn = [w(T.FFN_GATE, "n_embd", "n_ff", slot="ffn.gate")] if gated else []
        ffn.append(w(T.FFN_UP, "n_embd", "n_ff", slot="ffn.up"))
        if ffn_bias:
            ffn.append(b(T.FFN_UP, "n_ff", slot="ffn.up_bias"))
    ffn.append(w(T.FFN_DOWN, "n_ff", "n_embd", slot="ffn.down"))
    if ffn_bias:
        ffn.append(b(T.FFN_DOWN, "n_embd", slot="ffn.down_bias"))
    return (
        *(norm_w(T.ATTN_NORM, "attn_norm", with_bias=norm_bias) if pre_norms else ()),
        *attn,
        *(norm_w(T.ATTN_POST_NORM, "attn_post_norm") if post_norms else ()),
        *(norm_w(T.FFN_NORM, "ffn_norm", with_bias=norm_bias) if pre_norms and ffn_norm else ()),
        *ffn,
        *(norm_w(T.FFN_POST_NORM, "ffn_post_norm") if post_norms else ()),
    )


def decoder(
    block: Declaration, *, tail: Declaration = (), norm_bias: bool = False, output_bias: bool = False
) -> Declaration:
    """A decoder's whole file: embeddings, the blocks, the final norm, the LM head (optional: tied), `tail`."""
    out_norm = norm_w(T.OUTPUT_NORM, "output_norm", with_bias=norm_bias)
    out_bias = (b(T.OUTPUT, "n_vocab", slot="output_bias"),) if output_bias else ()
    return (TOKEN_EMBD, *block, *out_norm, OUTPUT, *out_bias, *tail)
