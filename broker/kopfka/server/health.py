"""The HTTP endpoint for Kubernetes probes and Prometheus (`kopfka.http.listener`).

/healthz answers as long as the event loop runs (liveness, also during log recovery);
/readyz answers 200 only in the RUNNING lifecycle state; /metrics serves prometheus-client's
default registry, into which `start` exports the process's BrokerMetrics; /debug/replication-trace
the stage stamps of kopfka.server.replication_trace (GET takes them, DELETE drops them; only when
that benchmark-only trace is enabled). prometheus-client is imported only once this server starts:
its import costs ~27 ms of a cold start, for nothing on a broker without this listener.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kopfka.server.replication_trace import TRACE

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)


class HealthServer:
    def __init__(self, state: Callable[[], str], ready: Callable[[], bool]) -> None:
        self._state = state
        self._ready = ready
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        # imported here: aiohttp's import builds two default SSL contexts (~0.3 s of a start
        # that has no HTTP listener)
        from aiohttp import web

        from kopfka.metrics.broker_metrics import BrokerMetrics
        from kopfka.metrics.exposition import export

        export(BrokerMetrics.shared())  # before serving: the collectors skip what is not bound yet
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        if TRACE.enabled:
            app.router.add_get("/debug/replication-trace", self._replication_trace)
            app.router.add_delete("/debug/replication-trace", self._forget_replication_trace)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else port
        log.info("Health and metrics endpoint on http://%s:%s", host, self.port)

    async def _healthz(self, _: web.Request) -> web.Response:
        from aiohttp import web

        return web.Response(text=self._state())

    async def _readyz(self, _: web.Request) -> web.Response:
        from aiohttp import web

        return web.Response(status=200 if self._ready() else 503, text=self._state())

    async def _metrics(self, _: web.Request) -> web.Response:
        from aiohttp import web
        from prometheus_client import REGISTRY, generate_latest
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _replication_trace(self, _: web.Request) -> web.Response:
        from aiohttp import web

        return web.json_response(TRACE.take())

    async def _forget_replication_trace(self, _: web.Request) -> web.Response:
        """Drop the stamps unread: encoding a warm-up's worth as JSON blocked the loop ~50 ms."""
        from aiohttp import web

        return web.json_response({"node_id": TRACE.node_id, "forgotten": TRACE.forget()})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
