"""Every command that takes a model takes the first shard of a split model (`-m NAME-00001-of-0000N.gguf`) and
answers as it does for the whole file; a broken set, or an import of one, is refused by name."""

from __future__ import annotations

import json

import pytest

from llamay.native.cli import main
from tests import paths
from tests.gguf.split_files import split_with_gguf_py

pytestmark = pytest.mark.native_only


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    pytest.importorskip("gguf")
    return split_with_gguf_py(paths.stories("f32"), tmp_path_factory.mktemp("split") / "stories", 3)


@pytest.fixture
def env(tmp_path, monkeypatch):
    for k in ("LLAMAY_MODELS", "OLLAMA_MODELS"):
        monkeypatch.setenv(k, str(tmp_path / k))
    return tmp_path


def _out(capsys, *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    "args",
    [
        ("run", "-p", "Once upon a time", "-n", "12", "--temp", "0", "--backend", "portable"),
        ("tokenize", "Once upon a time"),
        ("verify",),
    ],
    ids=lambda a: a[0],
)
def test_a_command_answers_for_the_shards_as_for_the_whole_file(shards, capsys, args):
    command, rest = args[0], args[1:]
    whole = _out(capsys, command, "-m", str(paths.stories("f32")), *rest)
    assert _out(capsys, command, "-m", str(shards[0]), *rest).replace(str(shards[0]), "X") == whole.replace(
        str(paths.stories("f32")), "X"
    )


def test_info_says_the_model_is_split(shards, capsys):
    out = _out(capsys, "info", "-m", str(shards[0]))
    assert "split         3 shards" in out and "n_vocab                512" in out
    card = json.loads(_out(capsys, "info", "-m", str(shards[0]), "--json"))
    assert card["shards"] == [str(p) for p in shards]
    assert [t["shard"] for t in card["tensors"]] == sorted(t["shard"] for t in card["tensors"])
    assert {t["shard"] for t in card["tensors"]} == {0, 1, 2}


def test_a_missing_shard_is_named_not_traced(shards, capsys, tmp_path):
    for p in shards[:2]:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    first = tmp_path / shards[0].name
    for args in (["info", "-m", str(first)], ["run", "-m", str(first), "-p", "x"]):
        assert main(args) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert f"{tmp_path / shards[2].name}: shard 3 of 3 of the split model {first} is missing" in err


def test_a_split_model_is_stored_as_its_shards_and_runs_as_the_whole_file(shards, env, capsys):
    """`import` of a first shard stores every shard (one model layer each, in order); the stored model runs as the
    whole file does, `show --modelfile` round-trips through `create`, and `rm` + `prune` leave no shard or view."""
    from llamay.native.store import llamay_store, resolve
    from llamay.native.store.manifests import MODEL

    assert main(["import", str(shards[0]), "story"]) == 0
    store = llamay_store()
    r = resolve("story", pull=False)
    m = store.read_manifest(r.manifest)
    digests = [x.digest for x in m.all(MODEL)]
    assert len(digests) == 3 and [store.blob(d).read_bytes() for d in digests] == [p.read_bytes() for p in shards]
    run = ("run", "-p", "Once upon a time", "-n", "12", "--temp", "0", "--backend", "portable")
    assert _out(capsys, *run[:1], "-m", "story", *run[1:]) == _out(capsys, *run[:1], "-m", str(paths.stories("f32")),
                                                                    *run[1:])  # fmt: skip
    info = json.loads(_out(capsys, "info", "-m", "story", "--json"))
    assert len(info["shards"]) == 3
    modelfile = env / "Modelfile"
    modelfile.write_text(_out(capsys, "show", "story", "--modelfile") + "SYSTEM again\n")
    assert main(["create", "story2", "-f", str(modelfile)]) == 0
    m2 = store.read_manifest(resolve("story2", pull=False).manifest)
    assert [x.digest for x in m2.all(MODEL)] == digests  # the same shards, not copies
    for name in ("story", "story2"):
        assert main(["rm", name]) == 0
    capsys.readouterr()
    assert not any(store.blob(d).exists() for d in digests)
    assert not any((store.root / ".shards").iterdir())


def test_an_import_of_a_later_shard_or_a_broken_set_is_refused_by_name(shards, env, capsys, tmp_path):
    assert main(["import", str(shards[1]), "story"]) == 1
    assert "open its first shard" in capsys.readouterr().err
    for p in shards[:2]:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    assert main(["import", str(tmp_path / shards[0].name), "story"]) == 1
    err = capsys.readouterr().err
    assert "shard 3 of 3" in err and "is missing" in err and "Traceback" not in err
    assert main(["show", "story"]) == 1  # nothing was stored
