"""`llamay ps [--host URL]`: what a running server has loaded, as `ollama ps` shows it (its /api/ps)."""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request

from llamay.errors import LlamayError
from llamay.native.store.progress import human_bytes

DEFAULT_HOST = "http://127.0.0.1:8080"
TIMEOUT = 10.0  # seconds
RESPONSE_LIMIT = 1 << 20  # bytes of /api/ps read at most
FOREVER_YEAR = "9999"  # expires_at of a model loaded for the server's lifetime


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ps", help="list the models a running llamay (or Ollama) server has loaded")
    p.add_argument("--host", help=f"the server (default $LLAMAY_HOST, else {DEFAULT_HOST})")
    p.add_argument("--api-key", help="its key, if it has one (default $LLAMAY_API_KEY)")
    p.set_defaults(func=run)


def loaded(host: str, api_key: str | None = None) -> list[dict]:
    """The `models` of the server's /api/ps; LlamayError says what went wrong, by URL."""
    url = host.rstrip("/") + "/api/ps"
    if "://" not in url:
        url = "http://" + url
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            body = r.read(RESPONSE_LIMIT + 1)
    except urllib.error.HTTPError as e:
        raise LlamayError(f"{url}: {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        raise LlamayError(f"{url}: no server answers ({getattr(e, 'reason', e)}): is `llamay serve` running?") from None
    if len(body) > RESPONSE_LIMIT:
        raise LlamayError(f"{url}: the answer is larger than {RESPONSE_LIMIT:,} bytes")
    try:
        models = json.loads(body)["models"]
        if not isinstance(models, list) or not all(isinstance(m, dict) for m in models):
            raise TypeError("models is not a list of objects")
    except (ValueError, KeyError, TypeError) as e:
        raise LlamayError(f"{url}: not an /api/ps answer ({e})") from None
    return models


def run(args: argparse.Namespace) -> int:
    host = args.host or os.environ.get("LLAMAY_HOST") or DEFAULT_HOST
    models = loaded(host, args.api_key or os.environ.get("LLAMAY_API_KEY"))
    print(f"{'NAME':<32} {'ID':<12}  {'SIZE':>9}  {'PROCESSOR':<9}  UNTIL")
    for m in models:
        expires = str(m.get("expires_at", ""))
        until = "Forever" if expires.startswith(FOREVER_YEAR) else expires
        vram = m.get("size_vram") or 0
        processor = "100% GPU" if vram and vram >= (m.get("size") or 0) else "100% CPU"
        size = m.get("size")
        print(f"{m.get('name', '?')!s:<32} {str(m.get('digest', ''))[:12]:<12}  "
              f"{human_bytes(size) if isinstance(size, int) else '?':>9}  {processor:<9}  {until}")  # fmt: skip
    return 0
