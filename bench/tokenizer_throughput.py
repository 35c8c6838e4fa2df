"""Encode throughput of llamay's pure-Python tokenizers against Hugging Face `tokenizers` (Rust) on the same
vocabulary, in the same run: ~1 MB of English text, generated here from a built-in word list (no download).

    python bench/tokenizer_throughput.py [--mb 1.0] [--vocab smollm2 llama-spm ...]

Prints MB/s for each, their ratio, and whether both produced the same ids. "cold" is a fresh tokenizer (empty
piece cache), "warm" the same tokenizer encoding the text again. Vocabularies: smollm2 (byte-level BPE, from the
model cache) and llama-spm (SentencePiece BPE, from ../shared/fixtures/vocab) by default; also gpt-2, gemma3,
bert-bge (llamay only: no HF equivalent is built for WordPiece here).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root: tests.paths, tests.tokenizer

from llamay.gguf import open_gguf
from llamay.tokenizer import load_tokenizer

WORDS = """the of and to a in is it you that he was for on are with as I his they be at one have this from or had by
hot word but what some we can out other were all there when up use your how said an each she which do their
time if will way about many then them write would like so these her long make thing see him two has look
more day could go come did number sound no most people my over know water than call first who may down side
been now find any new work part take get place made live where after back little only round man year came
show every good me give our under name very through just form sentence great think say help low line differ
turn cause much mean before move right boy old too same tell does set three want air well also play small
end put home read hand port large spell add even land here must big high such follow act why ask men change
went light kind off need house picture try us again animal point mother world near build self earth father
head stand own page should country found answer school grow study still learn plant cover food sun four
between state keep eye never last let thought city tree cross farm hard start might story saw far sea draw
left late run don't while press close night real life few north open seem together next white children begin
got walk example ease paper group always music those both mark often letter until mile river car feet care
second book carry took science eat room friend began idea fish mountain stop once base hear horse cut sure
watch color face wood main enough plain girl usual young ready above ever red list though feel talk bird
soon body dog family direct pose leave song measure door product black short numeral class wind question
happen complete ship area half rock order fire south problem piece told knew pass since top whole king space
heard best hour better true during hundred five remember step early hold west ground interest reach fast
verb sing listen six table travel less morning ten simple several vowel toward war lay against pattern slow
center love person money serve appear road map rain rule govern pull cold notice voice unit power town fine
certain fly fall lead cry dark machine note wait plan figure star box noun field rest correct able pound
done beauty drive stood contain front teach week final gave green oh quick develop ocean warm free minute
strong special mind behind clear tail produce fact street inch multiply nothing course stay wheel full force
blue object decide surface deep moon island foot system busy test record boat common gold possible plane
stead dry wonder laugh thousand ago ran check game shape equate hot miss brought heat snow tire bring yes
distant fill east paint language among""".split()  # noqa: SIM905


def english(n_bytes: int, seed: int = 0) -> str:
    """Deterministic English-like text: sentences of common words with capitals, commas, numbers, contractions,
    quotes and paragraphs."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < n_bytes:
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 18))]
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), str(rng.choice([rng.randint(2, 99), rng.randint(1000, 2030)])))
        if rng.random() < 0.3:
            i = rng.randrange(1, len(words))
            words[i - 1] += ","
        if rng.random() < 0.1:
            words[0] = '"' + words[0]
            words[-1] += '"'
        sentence = " ".join(words)
        sentence = sentence[0].upper() + sentence[1:] + rng.choice(".....?!")
        sep = "\n\n" if rng.random() < 0.08 else " "
        out.append(sentence + sep)
        size += len(sentence) + len(sep)
    return "".join(out)[:n_bytes]


def vocab_file(name: str) -> Path:
    from tests.paths import GEMMA3, REGISTRY_CACHE, SMOLLM2, VOCAB

    files = {"smollm2": REGISTRY_CACHE / SMOLLM2, "gemma3": REGISTRY_CACHE / GEMMA3}
    return files.get(name, VOCAB / f"ggml-vocab-{name}.gguf")


def timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t0, result


def bench(name: str, text: str) -> None:
    path = vocab_file(name)
    if not path.exists():
        print(f"{name:10s} skipped: {path} is missing")
        return
    mb = len(text.encode("utf-8")) / 1e6
    with open_gguf(path) as f:
        load_s, tok = timed(load_tokenizer, f)
    cold_s, ids = timed(tok.encode, text, False, False)
    warm_s, _ = timed(tok.encode, text, False, False)
    line = f"{name:10s} llamay {mb / cold_s:6.2f} MB/s cold, {mb / warm_s:6.2f} MB/s warm (load {load_s:.2f} s)"
    try:
        from tests.tokenizer.hf_reference import hf_byte_level_bpe, hf_sentencepiece_bpe
    except ImportError:
        print(line + "  | HF tokenizers not installed")
        return
    kind = tok.vocab.kind
    if kind not in ("bpe", "spm"):
        print(line + f"  | no HF equivalent built for {kind}")
        return
    hf = hf_byte_level_bpe(tok.vocab) if kind == "bpe" else hf_sentencepiece_bpe(tok.vocab)
    hf.encode(text[:1000])  # warm up
    hf_s, enc = timed(hf.encode, text)
    same = "same ids" if enc.ids == ids else "IDS DIFFER"
    # HF is built for many short inputs: also time it on the paragraphs, as a batch (its own threads)
    paragraphs = [p + "\n\n" for p in text.split("\n\n")]
    batch_s, _ = timed(hf.encode_batch, paragraphs)
    print(
        f"{line}\n{'':10s} HF tokenizers {mb / hf_s:6.2f} MB/s one string, {mb / batch_s:6.2f} MB/s by paragraph"
        f" (batch)  | llamay cold / HF: {hf_s / cold_s:.2f} and {batch_s / cold_s:.2f}  ({same}, {len(ids)} tokens)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1.0, help="text size in MB (default 1)")
    ap.add_argument("--vocab", nargs="*", default=["smollm2", "llama-spm"], help="vocabularies to run")
    args = ap.parse_args()
    text = english(int(args.mb * 1e6))
    print(
        f"{len(text.encode()) / 1e6:.2f} MB of English text, {len(text.split())} words, Python {sys.version.split()[0]}"
    )
    for name in args.vocab:
        bench(name, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
