"""The GGUF mutation fuzzer (`tests/gguf/fuzz.py`), a bounded run: every mutated fixture ends in a clean refusal
naming the file, or in a model that loads, passes the audit and runs a forward pass with finite output.
`scripts/fuzz_gguf.py --seed S --count N` runs thousands; `LLAMAY_FUZZ_SEED` / `LLAMAY_FUZZ_CASES` change this
run's seed and size."""

from __future__ import annotations

import os

from llamay.platform import IS_PYODIDE
from tests import paths
from tests.gguf.fuzz import fixture_files, fuzz

SEED = int(os.environ.get("LLAMAY_FUZZ_SEED", "13"))
# a few cases a second natively; the Pyodide run is slower (wasm kernels, no mmap) and smaller
CASES = int(os.environ.get("LLAMAY_FUZZ_CASES", "40" if IS_PYODIDE else "150"))
# the larger vocabularies take seconds a case (a 50,000-100,000-token tokenizer to build): the script fuzzes them
CI_VOCABS = ("ggml-vocab-bert-bge.gguf", "ggml-vocab-llama-spm.gguf")


def test_mutated_fixtures_end_in_a_clean_error_or_a_clean_run():
    files = {p: w for p, w in fixture_files().items() if p.parent != paths.VOCAB or p.name in CI_VOCABS}
    if IS_PYODIDE:  # all-MiniLM's 46 MB copied per case is too slow there
        files.pop(paths.MINILM, None)
    summary = fuzz(SEED, CASES, files)
    assert not summary.failures, summary.report()
    ran = sum(n for (_, o), n in summary.outcomes.items() if o in ("ran", "tokenized"))
    refused = sum(summary.stages.values())
    # both endings occur, and refusals come from every stage that checks (not only the parser)
    assert ran and refused, summary.report()
    assert {"parse", "load"} <= set(summary.stages), summary.report()
