"""The tiny models that are another architecture's with keys added (rotary scaling, clamped QKV): llama.cpp's
golden of each differs from its counterpart's, so matching it checks what the keys do (were the keys ignored,
the counterpart's numbers would come out and fail)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.models.tiny import VARIANT_ARCHES

GOLDENS = Path(__file__).resolve().parent.parent / "goldens"
# each variant and the model with the same weights without its keys (LongRoPE's two files differ only in their
# original context, so one is the other's counterpart)
COUNTERPART = {
    "llama-yarn": "llama",
    "qwen2-yarn": "qwen2",
    "llama-linear": "llama",
    "gemma3-linear": "gemma3",
    "phi3-longrope": "phi3",
    "phi3-longrope-short": "phi3-longrope",
    "llama-ropefreqs": "llama",
    "olmo-clamp": "olmo",
}
MATTERS = 0.1  # logprob: twice the goldens' tolerance, far above float noise


def _last_logprobs(name: str) -> list[float]:
    return json.loads((GOLDENS / f"tiny-{name}.json").read_text())["cases"][0]["last_logprobs"]


def test_every_variant_has_its_counterpart():
    assert set(COUNTERPART) == set(VARIANT_ARCHES)


@pytest.mark.parametrize("name", VARIANT_ARCHES)
def test_llamacpp_gives_the_variant_other_numbers(name):
    a, b = _last_logprobs(name), _last_logprobs(COUNTERPART[name])
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) > MATTERS
