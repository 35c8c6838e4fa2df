"""`llamay serve`: an asyncio HTTP server (FastAPI on uvicorn) in front of the continuous-batching scheduler.

app.py            the ASGI app: routers, OpenAPI metadata, API key, error bodies (OpenAI's; Ollama's on /api)
guard.py          Host and Origin checks, CORS for --cors-origin, JSON-only bodies, the body size limit
bodies.py         request bodies as strict JSON (no NaN, no infinities, bounded nesting)
docs_page.py      /docs (Swagger UI served from a package: works offline) and /openapi.json, behind the key
limits.py         the limits on what one request may ask (docs/server.md has the table)
openai_routes.py  /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models (also without /v1)
ollama_routes.py  /api/generate, /api/chat, /api/embed, /api/embeddings, /api/tags, /api/show, /api/ps,
                  /api/version
store_routes.py   /api/pull, /api/create, /api/copy, /api/delete, /api/blobs/:digest (llamay's store)
store_show.py     /api/show of a stored model, read from its store
pool.py           the models answered for by name: load on first use, keep_alive, idle unloading, the budget
keep_alive.py     Ollama's keep_alive durations
contexts.py       /llamay/contexts: named KV contexts (create, fork, snapshot, restore, continue, delete);
                  /llamay/snapshots: the snapshot files (list, delete)
context_store.py  the contexts by name
snapshot_store.py the snapshot folder: listing, quota, atomic writes and deletes off the event loop
scheduler.py      the model thread: bounded queue, admission, batcher steps, cancellation, deadlines
streaming.py      scheduler updates to text (detokenizer + stop strings), SSE and NDJSON framing
params.py         request fields to generation parameters and a Sampler (via llamay.sampling.request)
service.py        the loaded models, what the routes share, the preparation threads (templates, tokenizing)
metrics.py        Prometheus text format
request_log.py    one log line per request: method, path, status, tokens in and out, milliseconds
"""

from .app import create_app
from .service import Service

__all__ = ["Service", "create_app"]
