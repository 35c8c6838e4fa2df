"""Samplers as a chain of small transforms, in llama.cpp's default order and with its names and defaults:
logit bias, penalties (repetition/presence/frequency), DRY, top-n-sigma, top-k, typical-p, top-p, min-p,
XTC, temperature (dynamic too), then a seeded draw; or mirostat v1/v2. One module per transform.

    from llamay.sampling import Sampler, SamplerConfig
    sampler = Sampler(SamplerConfig(temp=0.7, seed=42), constraint=None, tokenizer=tok)
    token = sampler.sample(backend, logits, 0, n_vocab)          # chooses and accepts
    req = sampling_from_request(body, "openai", n_vocab)         # a request's fields, checked; req.config()
    result = sampler.sample_ex(backend, logits, 0, n_vocab)      # + logprobs when n_probs > 0

Reproducibility: the RNG is Python's `random.Random` seeded with an int, which draws the same numbers under
CPython and Pyodide, so a seed gives the same tokens natively and in the browser (given the same logits).
"""

from .candidates import Candidates, log_softmax, logsumexp, softmax
from .config import (
    BOUNDS,
    DEFAULT_SAMPLERS,
    DEFAULT_TOP_K,
    LLAMA_DEFAULT_SEED,
    Bound,
    SamplerConfig,
    SamplerConfigError,
)
from .request import RequestFieldError, RequestSampling, sampling_from_request
from .sampler import Sampler, SampleResult, TokenLogprob

__all__ = [
    "BOUNDS",
    "DEFAULT_SAMPLERS",
    "DEFAULT_TOP_K",
    "LLAMA_DEFAULT_SEED",
    "Bound",
    "Candidates",
    "RequestFieldError",
    "RequestSampling",
    "SampleResult",
    "Sampler",
    "SamplerConfig",
    "SamplerConfigError",
    "TokenLogprob",
    "log_softmax",
    "logsumexp",
    "sampling_from_request",
    "softmax",
]
