"""Unigram (`t5`) against SentencePiece itself: a small model is trained here on the fixtures' text (no
download), stored as a GGUF the way llama.cpp's converter stores T5 vocabularies, and both encode the same text.

(The model has no user-defined pieces: llama.cpp, and we, cut those out of the text before normalising, which
SentencePiece does not.)
"""

from __future__ import annotations

import io

import pytest

from llamay.gguf import GGUFArray, GGUFFile, GGUFValueType, GGUFWriter
from llamay.tokenizer import Tokenizer, load_tokenizer
from tests.paths import FIXTURES
from tests.tokenizer.vocabs import all_vector_inputs, random_texts

pytestmark = pytest.mark.native_only


@pytest.fixture(scope="module")
def models() -> tuple[Tokenizer, object]:
    spm = pytest.importorskip("sentencepiece")
    pytest.importorskip("google.protobuf")
    from sentencepiece import sentencepiece_model_pb2

    text = (FIXTURES / "README.md").read_text(encoding="utf-8")
    lines = [line for line in text.split("\n") if line.strip()]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, vocab_size=300, model_type="unigram",
        character_coverage=1.0, minloglevel=2,
    )  # fmt: skip
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(buf.getvalue())
    w = GGUFWriter()
    w.add("general.architecture", "t5")
    w.add("tokenizer.ggml.model", "t5")
    w.add("tokenizer.ggml.tokens", [p.piece for p in proto.pieces])
    w.add("tokenizer.ggml.scores", GGUFArray(GGUFValueType.FLOAT32, [p.score for p in proto.pieces]))
    w.add("tokenizer.ggml.token_type", GGUFArray(GGUFValueType.INT32, [p.type for p in proto.pieces]))
    w.add("tokenizer.ggml.add_space_prefix", proto.normalizer_spec.add_dummy_prefix)
    w.add("tokenizer.ggml.remove_extra_whitespaces", proto.normalizer_spec.remove_extra_whitespaces)
    charsmap = proto.normalizer_spec.precompiled_charsmap
    w.add("tokenizer.ggml.precompiled_charsmap", GGUFArray(GGUFValueType.UINT8, list(charsmap)))
    w.add("tokenizer.ggml.unknown_token_id", proto.trainer_spec.unk_id)
    w.add("tokenizer.ggml.eos_token_id", proto.trainer_spec.eos_id)
    ours = load_tokenizer(GGUFFile.from_buffer(w.to_bytes()))
    return ours, spm.SentencePieceProcessor(model_proto=buf.getvalue())


def test_matches_sentencepiece(models: tuple[Tokenizer, object]) -> None:
    ours, reference = models
    assert ours.vocab.kind == "ugm" and ours.vocab.precompiled_charsmap
    # NFKC through the precompiled map: full-width letters, ligatures, compatibility digits
    texts = all_vector_inputs() + random_texts(500, seed=5) + ["ＡＢＣ ﬁne ①②  x\u3000y", "  lead  and trail  "]
    for text in texts:
        assert ours.encode(text, add_special=False) == reference.encode(text), repr(text)


def test_adds_eos(models: tuple[Tokenizer, object]) -> None:
    ours, _ = models
    ids = ours.encode("hello")
    assert ids[-1] == ours.eos_id and ours.bos_id is None
