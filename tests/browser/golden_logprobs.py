"""Teacher-forced log-probabilities of a golden case's top tokens, step by step: the same code natively and under
Pyodide (`node web/bin/llamay-web.mjs python tests/browser/golden_logprobs.py MODEL BACKEND GOLDEN CASE STEPS`
prints them as JSON), so the two targets can be compared number by number."""

from __future__ import annotations

import json
import sys

from llamay.generate import decode_step, prefill
from llamay.model import load_model
from llamay.sampling import log_softmax


def golden_logprobs(model_path: str, backend, case: dict, steps: int) -> dict:
    """{"variant": the kernel module variant (wasm), "logprobs": [[logprob of each golden top token] per step]}."""
    with load_model(model_path, backend) as m:
        st = m.new_state(n_ctx=len(case["prompt_ids"]) + steps + 1)
        prefill(m, st, case["prompt_ids"])
        out = []
        for step in case["steps"][:steps]:
            lp = log_softmax(m.backend.read_f32(st.logits, 0, m.cfg.n_vocab))
            out.append([lp[tok] for tok, _ in step["top"]])
            decode_step(m, st, step["id"])
        return {"variant": getattr(m.backend, "variant", ""), "logprobs": out}


if __name__ == "__main__":
    model, backend, golden, case_index, steps = sys.argv[1:6]
    with open(golden) as f:
        case = json.load(f)["cases"][int(case_index)]
    print(json.dumps(golden_logprobs(model, backend, case, int(steps))))
