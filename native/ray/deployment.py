"""The Ray Serve application: `Ingress` (behind Ray's HTTP proxy; reads a request, computes its prefix key,
streams the answer back) and `Engine` (N replicas, each a whole llamay server: its scheduler, KV pool and prefix
cache). For Ray's own tools: `serve run llamay.native.ray.deployment:build_app model=smollm2 replicas=2`."""

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from ray import serve
from ray.serve.config import AutoscalingConfig, RequestRouterConfig
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle

from .asgi_bridge import run_asgi
from .prefix_key import PREFIX_CHARS
from .relay import GONE, MAX_BODY, REPLICA_HEADER, RETRY_HEADER, Guarded, error, relay, route_key
from .router import AVOID_KWARG, KEY_KWARG, PIN_KWARG

ROUTINGS = {"prefix": "PrefixRouter", "random": "RandomRouter", "default": None}  # default: Ray's own
DEFAULTS: dict[str, Any] = {"model": None, "replicas": 1, "min_replicas": None, "max_replicas": None,
                            "parallel": 4, "queue": 64, "ctx_size": None, "threads": 1, "backend": None,
                            "routing": "prefix", "num_cpus": 1.0, "max_ongoing_requests": None,
                            "prefix_chars": PREFIX_CHARS, "stats_period_s": 2.0, "api_key": None,
                            "graceful_shutdown_timeout_s": 30.0, "max_queued_requests": None, "host": "127.0.0.1",
                            "health_check_period_s": 5.0, "health_check_timeout_s": 30.0,
                            "allowed_hosts": (), "cors_origins": (), "autoscaling": None}  # fmt: skip
LISTS = ("allowed_hosts", "cors_origins")  # `serve run ... allowed_hosts=a.example,b.example`
QUEUE_FULL = "every replica is busy and the ingress's queue is full: retry later"
INGRESS_SPARE = 16  # requests the ingress takes beyond what the replicas hold: /health, /metrics, a 429's retry
# the replica's headers the ingress does not pass on: the proxy frames the body anew; its guard says nosniff itself
RELAYED_NOT = (b"content-length", b"transfer-encoding", b"x-content-type-options")


class Engine:
    """One replica: a llamay server (the routes of `llamay serve`) run in process, request by request."""

    def __init__(self, model: str | None, parallel: int, queue: int, ctx_size: int | None, threads: int,
                 backend: str | None, api_key: str | None, host: str = "127.0.0.1",
                 allowed_hosts: tuple[str, ...] = (), cors_origins: tuple[str, ...] = ()) -> None:  # fmt: skip
        from llamay.native.server import Service, create_app
        from llamay.native.store import DEFAULT_MODEL, resolve

        r = resolve(model)  # the store of this node: a catalogue name is pulled here, once
        aliases = (model, r.name) if model else (DEFAULT_MODEL, r.name, "default")
        with r.held() as path:
            self.service = Service.load(path, backend=backend, n_ctx=ctx_size or r.options.num_ctx,
                                        parallel=parallel, queue=queue, aliases=aliases,
                                        name=r.name if r.manifest else None, defaults=r.options)  # fmt: skip
        r.apply(self.service.generator.model)
        be = self.service.generator.model.backend
        if threads and hasattr(be, "set_threads"):
            be.set_threads(threads)
        # the ingress forwards the client's headers: the Host and Origin rules of `llamay serve` apply here, with
        # the proxy's address as the bound one (Ray's proxy has no such rule of its own)
        self.app = create_app(self.service, api_key=api_key, bound=host, allowed_hosts=tuple(allowed_hosts),
                              cors_origins=tuple(cors_origins))  # fmt: skip
        self.replica = serve.get_replica_context().replica_id.unique_id
        self.started = False

    async def handle(self, req: dict[str, Any], prefix_key: str | None = None, avoid: str | None = None,
                     replica: str | None = None) -> AsyncIterator[Any]:  # fmt: skip
        """The answer to one request: its head (with this replica's id), then its body chunks."""
        del prefix_key, avoid, replica  # read by the router (router.KEY_KWARG, AVOID_KWARG, PIN_KWARG), not here
        if not self.started:  # what the app's lifespan does, on this replica's event loop
            self.started = True
            if not self.service.scheduler.alive:
                self.service.start()
            self.app.state.pool.start()
        async for item in run_asgi(self.app, req):
            if isinstance(item, dict):
                item["replica"] = self.replica
            yield item

    def record_routing_stats(self) -> dict[str, Any]:
        """What the router reads (router.full, router.load): sequences running, jobs queued, the queue's size,
        and whether the model thread runs (a replica whose thread stopped answers 503 until Ray replaces it)."""
        s = self.service.scheduler
        return {"running": s.running, "queued": s.queue_depth, "queue": s.cfg.queue,
                "healthy": s.alive or not self.started}  # fmt: skip

    def check_health(self) -> None:
        """Ray's health check: a replica whose model thread stopped is replaced."""
        if not self.started:  # the model thread starts with the first request, on the replica's event loop
            return
        status, body = self.service.health()
        if status != 200:
            raise RuntimeError(f"llamay replica unhealthy: {'; '.join(body['problems'])}")

    def __del__(self) -> None:  # scale-down: Ray has drained its requests (graceful_shutdown_timeout_s)
        service = getattr(self, "service", None)
        if service is not None:
            service.scheduler.stop(timeout=0)


ingress_app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)  # llamay's own /docs pass through


@serve.ingress(ingress_app)
class Ingress:
    """Behind Ray's proxy: every route goes to an Engine replica chosen by the request's prefix key."""

    def __init__(self, engine: DeploymentHandle, prefix_chars: int = PREFIX_CHARS, host: str = "127.0.0.1",
                 allowed_hosts: tuple[str, ...] = (), cors_origins: tuple[str, ...] = ()) -> None:  # fmt: skip
        from llamay.native.server.guard import GuardConfig

        self.engine = engine.options(stream=True)
        self.prefix_chars = prefix_chars
        # the replicas' rules, applied here too: a request they would refuse is refused before its body is read
        self.guard = GuardConfig(bound=host, allowed_hosts=tuple(allowed_hosts), cors_origins=tuple(cors_origins),
                                 max_body_bytes=MAX_BODY)  # fmt: skip

    @ingress_app.api_route("/{path:path}", methods=["GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS"])
    async def forward(self, request: Request, path: str) -> Any:
        return Guarded(self.guard, lambda admitted: self._answer(admitted, "/" + path))

    async def _answer(self, request: Request, route: str) -> Any:
        body = await request.body()  # read by the guard, at most MAX_BODY
        key = await asyncio.to_thread(route_key, route, bytes(body), self.prefix_chars) if body else None
        req = {"method": request.method, "path": route, "query": request.url.query.encode(),
               "headers": [(k, v) for k, v in request.headers.raw], "body": bytes(body)}  # fmt: skip
        pin = request.headers.get(REPLICA_HEADER)  # a client's choice of replica (its /metrics, say)
        retried = None
        try:
            stream, head = await self._start(req, key, None, pin)
            if head["status"] == 429:  # that replica is full: once elsewhere (its 429 stands if this one is too)
                retried = "429"
                stream.cancel()
                stream, head = await self._start(req, key, head["replica"], pin)
        except BackPressureError:
            return error(429, QUEUE_FULL, "queue_full", route)
        except GONE as e:  # died before answering: nothing was sent, so it is safe to send it once elsewhere
            retried = "replica-died"
            try:
                stream, head = await self._start(req, key, None)
            except BackPressureError:
                return error(429, QUEUE_FULL, "queue_full", route)
            except GONE:
                return error(503, f"the replicas serving this model stopped before answering ({e.__class__.__name__}); "
                              "retry when Ray has restarted them", "replica_unavailable", route)  # fmt: skip
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in head["headers"]
                   if k.lower() not in RELAYED_NOT]  # fmt: skip
        headers.append((REPLICA_HEADER, head["replica"]))
        if retried:
            headers.append((RETRY_HEADER, retried))
        kind = dict((k.lower(), v) for k, v in headers).get("content-type", "")
        response = StreamingResponse(relay(stream, kind), status_code=head["status"])
        response.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        return response

    async def _start(self, req: dict[str, Any], key: str | None, avoid: str | None,
                     pin: str | None = None) -> tuple[Any, dict[str, Any]]:  # fmt: skip
        stream = self.engine.handle.remote(req, **{KEY_KWARG: key, AVOID_KWARG: avoid, PIN_KWARG: pin})
        return stream, await stream.__anext__()


def autoscaling(o: dict[str, Any]) -> AutoscalingConfig:
    """Ray's autoscaling_config: `autoscaling` (a dict of its fields, from a Serve config file) passed through, with
    min_replicas / max_replicas as shortcuts; a replica is busy beyond its decode batch (target: `parallel`)."""
    extra = dict(o["autoscaling"] or {})
    known = set(getattr(AutoscalingConfig, "model_fields", None) or AutoscalingConfig.__fields__)
    if unknown := sorted(set(extra) - known):
        raise ValueError(f"unknown autoscaling option(s) {', '.join(unknown)}; Ray's: {', '.join(sorted(known))}")
    lo = int(o["min_replicas"] if o["min_replicas"] is not None else extra.pop("min_replicas", 1))
    hi = int(o["max_replicas"] if o["max_replicas"] is not None else extra.pop("max_replicas", max(lo, o["replicas"])))
    extra.pop("min_replicas", None), extra.pop("max_replicas", None)
    fields = {"min_replicas": lo, "max_replicas": hi, "initial_replicas": min(max(o["replicas"], lo), hi),
              "target_ongoing_requests": o["parallel"], **extra}  # fmt: skip
    try:
        return AutoscalingConfig(**fields)
    except (TypeError, ValueError) as e:  # pydantic names the field and what is wrong with it
        raise ValueError(f"autoscaling options {fields}: {e}") from None


def build_app(args: dict[str, Any]) -> Any:
    """The application for `serve.run` or `serve run module:build_app key=value ...` (see DEFAULTS)."""
    unknown = sorted(set(args) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown llamay Ray option(s) {', '.join(unknown)}; known: {', '.join(DEFAULTS)}")
    o = {**DEFAULTS, **{k: v for k, v in args.items() if v is not None}}
    if o["routing"] not in ROUTINGS:
        raise ValueError(f"routing must be one of {', '.join(ROUTINGS)}, not {o['routing']!r}")
    for k in ("replicas", "parallel", "queue", "threads"):
        o[k] = int(o[k])
    for k in LISTS:
        o[k] = tuple(x for x in o[k].split(",") if x) if isinstance(o[k], str) else tuple(o[k])
    options: dict[str, Any] = {
        "name": "Engine",
        "ray_actor_options": {"num_cpus": float(o["num_cpus"]),
                              "runtime_env": {"env_vars": {"LLAMAY_THREADS": str(o["threads"] or os.cpu_count())}}},
        "max_ongoing_requests": int(o["max_ongoing_requests"] or o["parallel"] + o["queue"]),
        # beyond every replica's max_ongoing_requests, this many wait in the ingress; more get 429 (BackPressureError)
        "max_queued_requests": int(o["max_queued_requests"] if o["max_queued_requests"] is not None else o["queue"]),
        "graceful_shutdown_timeout_s": float(o["graceful_shutdown_timeout_s"]),
        "health_check_period_s": float(o["health_check_period_s"]),
        "health_check_timeout_s": float(o["health_check_timeout_s"]),
    }  # fmt: skip
    if o["min_replicas"] is not None or o["max_replicas"] is not None or o["autoscaling"]:
        options["autoscaling_config"] = autoscaling(o)
    else:
        options["num_replicas"] = o["replicas"]
    if ROUTINGS[o["routing"]]:
        options["request_router_config"] = RequestRouterConfig(
            request_router_class=f"llamay.native.ray.router:{ROUTINGS[o['routing']]}",
            request_routing_stats_period_s=float(o["stats_period_s"]))  # fmt: skip
    engine = serve.deployment(Engine).options(**options)
    # the ingress relays every request the replicas hold or Ray queues for them (Ray's default, 5 at once, would
    # hold the sixth stream at the proxy, /health included); the proxy keeps a bounded queue in front of it
    most = options["autoscaling_config"].max_replicas if "autoscaling_config" in options else o["replicas"]
    relayed = most * options["max_ongoing_requests"] + options["max_queued_requests"]
    ingress = serve.deployment(Ingress).options(name="Ingress", ray_actor_options={"num_cpus": 0},
                                                max_ongoing_requests=relayed + INGRESS_SPARE,
                                                max_queued_requests=options["max_queued_requests"])  # fmt: skip
    return ingress.bind(engine.bind(o["model"], o["parallel"], o["queue"], o["ctx_size"], o["threads"],
                                    o["backend"], o["api_key"], o["host"], o["allowed_hosts"], o["cors_origins"]),
                        int(o["prefix_chars"]), o["host"], o["allowed_hosts"], o["cors_origins"])  # fmt: skip
