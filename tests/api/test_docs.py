"""The examples of docs/library.md run as written, from the fixtures folder (their paths are relative to it),
each in a fresh namespace; a ```python native block runs natively only, when the catalogue model is stored."""

from __future__ import annotations

import re

import pytest

from llamay.platform import IS_PYODIDE
from tests import paths

DOC = paths.REPO / "docs" / "library.md"
BLOCK = re.compile(r"^```python( native)?\n(.*?)^```$", re.S | re.M)


def examples() -> list[tuple[str, str, bool]]:
    """(id, source, native only) of each example, named by the section it is in."""
    text = DOC.read_text(encoding="utf-8")
    out = []
    for m in BLOCK.finditer(text):
        section = re.findall(r"^## (.+)$", text[: m.start()], re.M)[-1]
        name = re.sub(r"\W+", "-", section.lower()).strip("-")
        out.append((f"{name}-{sum(1 for i, *_ in out if i.startswith(name)) + 1}", m.group(2), bool(m.group(1))))
    return out


EXAMPLES = examples()


def test_the_doc_has_its_examples():
    assert len(EXAMPLES) >= 9 and sum(native for *_, native in EXAMPLES) == 1


@pytest.mark.parametrize(("name", "source", "native"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_runs(name, source, native, monkeypatch):
    if native:
        if IS_PYODIDE:
            pytest.skip("stored models are native only")
        if paths.registry_path(paths.SMOLLM2) is None:
            pytest.skip("smollm2 is not stored: run `llamay pull --all`")
    if not (paths.FIXTURES / "models").is_dir():
        pytest.skip(f"no fixtures at {paths.FIXTURES}")
    monkeypatch.chdir(paths.FIXTURES)
    exec(compile(source, f"{DOC}:{name}", "exec"), {"__name__": f"library_doc_{name.replace('-', '_')}"})
