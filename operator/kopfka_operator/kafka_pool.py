"""Kafka admin connections pooled per KafkaCluster, and a batching queue per cluster.

Topic and Quota handlers run one per resource; each hands its work to its cluster's `Batcher`,
which runs everything queued in one go (one Metadata, one DescribeConfigs, one CreateTopics,
... for all of them) while the next batch gathers: group commit, so 1,000 resources cost a few
requests instead of thousands. Each cluster has its own connection, queue and runner task, so
a cluster that is down only delays the handlers of its own resources; after a failed connect
its pool refuses at once for a short while instead of making every batch wait for a timeout.

The connection is the project's own admin client (kopfka.client.admin): asyncio, kio-typed,
already used by the CLI and the roller, and it covers every call the reconcilers need.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kopfka.client.admin import Admin, AdminError
from kopfka.client.connection import KafkaConnection
from kopfka.protocol.errors import ErrorCode
from kopfka.security.client import ClientSecurity

log = logging.getLogger(__name__)

Item = TypeVar("Item")
Result = TypeVar("Result")
ClusterKey = tuple[str, str]  # (namespace, KafkaCluster name)


def reason_of(code: ErrorCode) -> str:
    """Kafka's error name as a condition reason: INVALID_CONFIG -> InvalidConfig."""
    return "".join(part.title() for part in code.name.split("_"))


@dataclass
class Outcome:
    """What reconciling one resource came to (Topic, Quota, User add their own fields); the
    kopf handlers turn it into conditions, events and retries."""

    ready: bool = True
    reason: str = "Reconciled"
    message: str = ""
    refused: bool = False  # the spec asks for what Kafka refuses: no retry until it changes
    retry_after: float | None = None  # a transient Kafka error: retry after this long
    drift: list[str] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)  # (type, reason, message)


class ClusterUnavailable(Exception):
    """The cluster's Kafka API cannot be reached, refused a whole request, or answered what
    could not be read: retry later. `reason` is the condition reason to report."""

    def __init__(self, message: str, reason: str = "ClusterUnavailable") -> None:
        super().__init__(message)
        self.reason = reason


class ClusterAdmin:
    """One pooled admin connection to a cluster, reopened after a failure."""

    def __init__(
        self,
        bootstrap: str,
        security: ClientSecurity | None = None,
        connect_timeout: float = 5.0,
        request_timeout: float = 60.0,
        down_for: float = 2.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.down_for = down_for
        self._admin: Admin | None = None
        self._nodes: dict[int, tuple[str, Admin]] = {}  # node id -> (address, connection)
        self._down_until = 0.0
        self._last_error = ""

    async def _connect(self) -> Admin:
        if time.monotonic() < self._down_until:
            raise ClusterUnavailable(self._last_error)
        errors = []
        for server in filter(None, (s.strip() for s in self.bootstrap.split(","))):
            try:
                conn = await KafkaConnection.open(server, timeout=self.connect_timeout, security=self.security)
                return Admin(conn, self.security)
            except (OSError, TimeoutError, ValueError) as exc:
                errors.append(f"{server}: {exc or type(exc).__name__}")
        self._last_error = f"cannot connect to {self.bootstrap} ({'; '.join(errors) or 'no address'})"
        self._down_until = time.monotonic() + self.down_for
        raise ClusterUnavailable(self._last_error)

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[Admin]:
        """The pooled connection; a connection or protocol failure inside closes it and becomes
        ClusterUnavailable (Kafka's own per-item errors are results, not failures)."""
        if self._admin is None:
            self._admin = await self._connect()
        admin = self._admin
        try:
            async with asyncio.timeout(self.request_timeout):
                yield admin
        except (OSError, TimeoutError, EOFError, asyncio.IncompleteReadError, ConnectionError) as exc:
            await self.close()
            raise ClusterUnavailable(f"{self.bootstrap}: {exc or type(exc).__name__}") from exc
        except AdminError as exc:  # a whole request refused (NOT_CONTROLLER, authorization, ...)
            raise ClusterUnavailable(str(exc), reason_of(exc.code)) from exc
        except Exception as exc:  # an answer we could not read: the connection may be out of step
            log.exception("Kafka call to %s failed", self.bootstrap)
            await self.close()
            raise ClusterUnavailable(f"{self.bootstrap}: {exc!r}", "KafkaCallFailed") from exc

    async def node(self, node_id: int, address: str) -> Admin:
        """A connection to one broker: a broker's own configs (replication throttle rates) are
        altered on that broker, as Kafka's admin client routes them."""
        cached = self._nodes.get(node_id)
        if cached is not None and cached[0] == address:
            return cached[1]
        if cached is not None:
            await self._close(cached[1])
        conn = await KafkaConnection.open(address, timeout=self.connect_timeout, security=self.security)
        self._nodes[node_id] = (address, Admin(conn, self.security))
        return self._nodes[node_id][1]

    async def close(self) -> None:
        admin, self._admin = self._admin, None
        nodes, self._nodes = self._nodes, {}
        for a in [admin, *(a for _, a in nodes.values())]:
            if a is not None:
                await self._close(a)

    @staticmethod
    async def _close(admin: Admin) -> None:
        with contextlib.suppress(Exception):
            await admin.close()


@dataclass
class _Pending(Generic[Item, Result]):
    item: Item
    future: asyncio.Future[Result]


@dataclass
class Batcher(Generic[Item, Result]):
    """Group commit: `submit` queues an item and waits; one runner task at a time processes
    everything queued (up to `max_batch`), so a burst of submissions becomes one batch.

    `process(items)` returns one result or exception per item, in order.
    """

    process: Callable[[Sequence[Item]], Awaitable[Sequence[Result | BaseException]]]
    gather_seconds: float = 0.05
    max_batch: int = 2000
    _queue: list[_Pending[Item, Result]] = field(default_factory=list)
    _runner: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._queue.append(_Pending(item, future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        return await asyncio.shield(future)

    async def _run(self) -> None:
        await asyncio.sleep(self.gather_seconds)
        while self._queue:
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            try:
                results: Sequence[Result | BaseException] = await self.process([p.item for p in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"batch of {len(batch)} got {len(results)} results")
            except Exception as exc:  # the whole batch failed: every waiter gets the error
                results = [exc] * len(batch)
            for pending, result in zip(batch, results, strict=True):
                if pending.future.done():
                    continue
                if isinstance(result, BaseException):
                    pending.future.set_exception(result)
                else:
                    pending.future.set_result(result)

    async def close(self) -> None:
        if self._runner is not None and not self._runner.done():
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        for pending in self._queue:
            if not pending.future.done():
                pending.future.set_exception(ClusterUnavailable("operator stopping"))
        self._queue.clear()


class ClusterPool:
    """ClusterAdmin per cluster, replaced when the cluster's bootstrap address changes."""

    def __init__(self, connect_timeout: float = 5.0, request_timeout: float = 60.0) -> None:
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self._admins: dict[ClusterKey, ClusterAdmin] = {}

    async def admin(self, key: ClusterKey, bootstrap: str, security: ClientSecurity | None = None) -> ClusterAdmin:
        current = self._admins.get(key)
        if current is not None and (current.bootstrap, current.security) == (bootstrap, security):
            return current
        if current is not None:
            await current.close()
        self._admins[key] = ClusterAdmin(bootstrap, security, self.connect_timeout, self.request_timeout)
        return self._admins[key]

    async def forget(self, key: ClusterKey) -> None:
        admin = self._admins.pop(key, None)
        if admin is not None:
            await admin.close()

    async def close(self) -> None:
        for key in list(self._admins):
            await self.forget(key)
