"""pyproject.toml lists every package of the source folders: a subpackage missing from it is absent from the wheel
(the Pyodide build, a plain `pip install .`) while an editable install still finds it."""

from __future__ import annotations

import tomllib

import pytest

from tests import paths

pytestmark = pytest.mark.native_only


def test_every_package_folder_is_in_the_wheel():
    setup = tomllib.loads((paths.REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = set()
    for package, folder in setup["package-dir"].items():
        for init in (paths.REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(paths.REPO / folder).parts
            folders.add(".".join((package, *rel)))
    assert folders - set(setup["packages"]) == set()
