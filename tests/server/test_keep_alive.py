"""Ollama's keep_alive (llamay.native.server.keep_alive): Go durations as Go's time.ParseDuration reads them,
numbers as seconds, negative as forever; the request schema's pattern admits exactly what the parser reads,
and its zero pattern exactly the durations that are zero (what the OpenAPI description of a one-file server
excludes)."""

from __future__ import annotations

import math
import re

import pytest

pytestmark = pytest.mark.native_only
pytest.importorskip("fastapi")
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

from llamay.native.server import keep_alive as ka  # noqa: E402
from llamay.native.server.errors import ApiError  # noqa: E402

# values Go's time.ParseDuration gives (in seconds)
GO = {"5m": 300, "1h30m": 5400, "1.5h": 5400, "300ms": 0.3, "2h45m30.5s": 9930.5, "1us": 1e-6, "1µs": 1e-6,
      "10ns": 1e-8, ".5s": 0.5, "1.s": 1, "0": 0, "+5s": 5, "0s": 0}  # fmt: skip


@pytest.mark.parametrize("text", sorted(GO))
def test_go_durations_read_as_go_reads_them(text):
    assert ka.seconds(text, 1.0) == pytest.approx(GO[text])


def test_numbers_negatives_and_the_default():
    assert ka.seconds(None, 42.0) == 42.0
    assert ka.seconds(30, 1.0) == 30.0 and ka.seconds(2.5, 1.0) == 2.5 and ka.seconds("30", 1.0) == 30.0
    for forever in (-1, -0.5, "-1", "-5m"):
        assert ka.seconds(forever, 1.0) == math.inf
    assert (
        ka.server_default(None) == ka.DEFAULT
        and ka.server_default("10m") == 600
        and ka.server_default("-1") == math.inf
    )


@pytest.mark.parametrize("bad", ["5 minutes", "1d", "m", "1h30", "", "--5m", "1e3s", "x" * 100])
def test_what_is_no_duration_is_refused_naming_the_field(bad):
    with pytest.raises(ApiError) as e:
        ka.seconds(bad, 1.0)
    assert e.value.status == 400 and e.value.param == "keep_alive" and e.value.message.startswith("keep_alive")
    assert not re.fullmatch(ka.PATTERN, bad)


@hypothesis.settings(max_examples=100, deadline=None)
@hypothesis.given(st.from_regex(ka.PATTERN, fullmatch=True).filter(lambda s: len(s) <= ka.MAX_CHARS))  # maxLength
def test_the_schemas_pattern_admits_only_what_the_parser_reads_and_zero_is_zero(text):
    value = ka.seconds(text, 1.0)  # never raises for a schema-valid value
    assert (re.fullmatch(ka.ZERO_PATTERN, text) is not None) == (value == 0)
