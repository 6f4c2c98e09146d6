"""A tiny HTTP endpoint for Prometheus and the kubelet: /metrics, /healthz, /readyz.

Shared by the operator and the worker; each passes its own registry and
health checks. aiohttp comes with kopf, so no extra server is needed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Check = Callable[[], Awaitable[str | None]]
"""A health check: None when healthy, else the reason it is not."""


async def start_http(
    *,
    host: str,
    port: int,
    registry: CollectorRegistry,
    liveness: Check,
    readiness: Check,
) -> web.AppRunner:
    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    def probe(check: Check) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_request: web.Request) -> web.Response:
            problem = await check()
            if problem is None:
                return web.Response(text="ok\n")
            return web.Response(status=503, text=f"{problem}\n")

        return handler

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", probe(liveness))
    app.router.add_get("/readyz", probe(readiness))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
