"""Split GGUF models (llama.cpp's gguf-split layout) read as one file: the tensors of shards written by gguf-py
equal the whole file's byte for byte, and each way a set of shards can be broken is refused by name."""

from __future__ import annotations

import os

import pytest

from llamay.errors import GGUFError
from llamay.gguf import GGUFFile, GGUFValueType, SplitGGUF, from_buffers, open_gguf, split_path, split_prefix
from tests.gguf.split_files import split_shards, split_with_gguf_py, split_with_llamay, write_shards
from tests.models.tiny import write_tiny

SPLIT_KEYS = ("split.no", "split.count", "split.tensors.count")


@pytest.fixture
def whole(tmp_path):
    path = tmp_path / "tiny-llama.gguf"
    write_tiny("llama", path)
    return path


def _same_as_whole(model, whole) -> None:
    with GGUFFile.open(whole) as f:
        assert list(model.tensors) == list(f.tensors)  # the same tensors, in the same order
        for t in f.tensors.values():
            got = model.tensors[t.name]
            assert (got.type, got.shape, got.index) == (t.type, t.shape, t.index)
            assert bytes(model.tensor_data(got)) == bytes(f.tensor_data(t)), t.name
        kept = {k: v for k, v in model.metadata.items() if k not in SPLIT_KEYS}
        assert kept == f.metadata


@pytest.mark.native_only
@pytest.mark.parametrize("n_shards", [2, 3])
def test_shards_written_by_gguf_py_read_as_the_whole_file(whole, tmp_path, n_shards):
    pytest.importorskip("gguf")
    paths = split_with_gguf_py(whole, tmp_path / "tiny", n_shards)
    with GGUFFile.open(paths[1]) as second:
        assert "general.architecture" not in second.fields  # gguf-py's layout: the metadata in the first only
        assert second.get("split.no") == 1 and second.fields["split.no"].type == GGUFValueType.UINT16
    with open_gguf(paths[0]) as model:
        assert isinstance(model, SplitGGUF) and len(model.shards) == n_shards
        assert {t.shard for t in model.tensors.values()} == set(range(n_shards))
        assert model.size == sum(os.path.getsize(p) for p in paths)
        _same_as_whole(model, whole)


@pytest.mark.parametrize("n_shards", [2, 3])
def test_shards_written_by_llamay_read_as_the_whole_file(whole, tmp_path, n_shards):
    paths = split_with_llamay(whole, tmp_path / "tiny", n_shards)
    with open_gguf(paths[0]) as model:
        _same_as_whole(model, whole)
    bufs = [p.read_bytes() for p in paths]
    with from_buffers(bufs, [p.name for p in paths]) as model:  # the browser's path: one buffer per shard
        _same_as_whole(model, whole)


def test_a_whole_file_opens_as_itself(whole):
    with open_gguf(whole) as f:
        assert isinstance(f, GGUFFile)
    with from_buffers([whole.read_bytes()], [whole.name]) as f:
        assert isinstance(f, GGUFFile)


def test_names_follow_llama_cpp():
    assert split_path("/m/model", 0, 3) == "/m/model-00001-of-00003.gguf"
    assert split_prefix("/m/model-00002-of-00003.gguf") == ("/m/model", 1, 3)
    assert split_prefix("/m/model.gguf") is None


# -- broken sets ------------------------------------------------------------------------------------------------


def _refused(path, match: str) -> None:
    with pytest.raises(GGUFError, match=match):
        open_gguf(path)


def test_a_missing_shard_is_named(whole, tmp_path):
    paths = split_with_llamay(whole, tmp_path / "tiny", 3)
    paths[2].unlink()
    _refused(paths[0], rf"^{paths[2]}: shard 3 of 3 of the split model {paths[0]} is missing$")
    bufs = [p.read_bytes() for p in paths[:2]]
    with pytest.raises(GGUFError, match=r"only 2 given: .*tiny-00003-of-00003.gguf is missing"):
        from_buffers(bufs, [os.fspath(p) for p in paths[:2]])
    with pytest.raises(GGUFError, match=r"first of 3 shards of a split model, but only 1 given: .*tiny-00002-of-"):
        from_buffers(bufs[:1], [os.fspath(paths[0])])  # one File picked where three were needed


def test_a_shard_of_another_split_is_refused(whole, tmp_path):
    paths = split_with_llamay(whole, tmp_path / "tiny", 2)
    other = split_shards(whole, 3)[1]
    other.write(paths[1])  # the second shard of a 3-way split, under the 2-way name
    _refused(paths[1], r"this is shard 2 of 3 of a split model .*open its first shard .*tiny-00001-of-00003.gguf")
    _refused(paths[0], rf"^{paths[1]}: key 'split.count' is 3, but the first shard {paths[0]} says 2")


def test_a_shard_out_of_place_is_refused(whole, tmp_path):
    paths = split_with_llamay(whole, tmp_path / "tiny", 3)
    os.replace(paths[1], tmp_path / "swap")
    os.replace(paths[2], paths[1])
    os.replace(tmp_path / "swap", paths[2])
    _refused(paths[0], rf"^{paths[1]}: key 'split.no' is 2, but this is shard 2 of 3 \(split.no 1\)")


def test_a_tensor_in_two_shards_is_refused(whole, tmp_path):
    shards = split_shards(whole, 2)
    name, t, shape, data = shards[0].tensors[0]
    shards[1].add_tensor(name, t, shape, data)
    paths = write_shards(shards, tmp_path / "tiny")
    _refused(paths[0], rf"^{paths[1]}: tensor '{name}' is also in {paths[0]}$")


def test_a_tensor_count_not_the_one_announced_is_refused(whole, tmp_path):
    shards = split_shards(whole, 2)
    shards[1].tensors.pop()
    paths = write_shards(shards, tmp_path / "tiny")
    n = shards[0].fields["split.tensors.count"][1]
    _refused(paths[0], rf"^{paths[0]}: key 'split.tensors.count' is {n}, but the 2 shards hold {n - 1} tensors$")


def test_a_first_shard_named_otherwise_is_refused(whole, tmp_path):
    paths = split_with_llamay(whole, tmp_path / "tiny", 2)
    renamed = tmp_path / "model.gguf"
    os.replace(paths[0], renamed)
    _refused(renamed, r"first of 2 shards .*does not follow llama.cpp's rule \(NAME-00001-of-00002.gguf\)")


def test_a_split_key_of_the_wrong_type_is_refused(whole, tmp_path):
    shards = split_shards(whole, 2)
    shards[0].fields["split.count"] = (GGUFValueType.STRING, "2")
    paths = write_shards(shards, tmp_path / "tiny")
    _refused(paths[0], r"key 'split.count' must be a non-negative integer, got STRING '2'")


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_a_refused_set_leaves_no_shard_mapped(whole, tmp_path):
    paths = split_with_llamay(whole, tmp_path / "tiny", 3)
    paths[2].unlink()
    _refused(paths[0], "is missing")
    with open("/proc/self/maps") as maps:
        assert os.fspath(tmp_path) not in maps.read()
