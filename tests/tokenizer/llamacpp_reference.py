"""llama.cpp as a reference, through `xllamacpp` (a prebuilt llama.cpp wheel): its server runs in-process and
listens on loopback; we call its /tokenize, /detokenize and /apply-template routes. Test-only."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any


class LlamaCppServer:
    def __init__(self, model: Path, *, embedding: bool = False) -> None:
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(model)
        params.n_ctx = 256
        params.embedding = embedding
        self._server = xllamacpp.Server(params)
        self.address = self._server.listening_address
        if not self.address.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"xllamacpp listens on {self.address}, not loopback")

    def _post(self, route: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.address + route, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        body = {"content": text, "add_special": add_special, "parse_special": parse_special}
        return self._post("/tokenize", body)["tokens"]

    def pieces(self, ids: list[int]) -> str:
        """The concatenated token pieces (what llama-server's /detokenize returns)."""
        return self._post("/detokenize", {"tokens": ids})["content"]

    def apply_template(self, messages: list[dict[str, Any]]) -> str:
        return self._post("/apply-template", {"messages": messages})["prompt"]

    def close(self) -> None:
        del self._server
