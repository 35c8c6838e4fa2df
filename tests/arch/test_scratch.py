"""Scratch buffers are declared per architecture (`core/arch/scratch.py`): a State allocates exactly what its
architecture declares, at the declared sizes, and nothing of another architecture's."""

from __future__ import annotations

import pytest

from llamay.arch import ARCHITECTURES, load_config
from llamay.gguf import GGUFFile
from llamay.kernels import get_backend
from llamay.model import State
from tests.models.tiny import ARCHES, SPECS, build_tiny


def _cfg(arch: str):
    with GGUFFile.from_buffer(build_tiny(arch).to_bytes(), f"{arch}.gguf") as f:
        return load_config(f)[1]


@pytest.mark.parametrize("arch", ARCHES)
def test_a_state_holds_the_buffers_its_architecture_declares(arch):
    cfg = _cfg(arch)
    st = State(cfg, get_backend("portable"), n_ctx=16, n_batch=4)
    declared = ARCHITECTURES[SPECS[arch].arch].scratch
    assert st.scratch.names == tuple(b.name for b in declared)
    for b in declared:
        assert len(getattr(st.scratch, b.name)) == b.length(cfg, 4)
        assert getattr(st, b.name) is getattr(st.scratch, b.name)  # st.<name> reaches it too


def test_bert_buffers_are_sized_by_the_batch_and_config():
    cfg = _cfg("bert")
    st = State(cfg, get_backend("portable"), n_ctx=16, n_batch=4)
    assert len(st.scratch.tmp_e) == 4 * cfg.n_embd and len(st.scratch.pooled) == cfg.n_embd
    assert list(st.scratch.zero_ids) == [0] * 4


def test_a_decoder_state_has_no_encoder_buffers():
    st = State(_cfg("llama"), get_backend("portable"), n_ctx=16, n_batch=4)
    with pytest.raises(AttributeError, match=r"State has no buffer 'pooled'"):
        _ = st.pooled


def test_a_config_without_its_parameters_cannot_size_their_buffers():
    """A hand-made config (`params=None`) whose architecture sizes a buffer by one of its own parameters (llama's
    MoE router by n_expert) is refused naming it, not given an empty buffer."""
    import dataclasses

    from llamay.errors import LlamayError

    cfg = dataclasses.replace(_cfg("llama"), params=None)
    with pytest.raises(LlamayError, match=r"sized by 'n_expert'.*params=None"):
        State(cfg, get_backend("portable"), n_ctx=16, n_batch=4)
