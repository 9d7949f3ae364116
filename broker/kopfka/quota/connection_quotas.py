"""Connection admission: counts (broker, per IP) and creation rates (broker, listener, per IP).

Broker-wide and per-listener limits delay admission (the acceptor waits for a slot or for the
rate throttle to pass) while per-IP limits reject: a per-IP rate violation is un-recorded
from every sensor so a refused connection does not inflate the rates, and a per-IP count over
its maximum is refused outright. The inter-broker listener is protected when there is more
than one listener: it bypasses the broker-wide count and rate.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kopfka.quota.client_quota_manager import INACTIVE_SENSOR_EXPIRATION_MS
from kopfka.quota.stats import MetricConfig, QuotaViolation, Sensor, throttle_time_ms
from kopfka.timeouts import wait_quietly

UNLIMITED = 2**31 - 1
CONNECTION_CREATION_RATE = "connection_creation_rate"


class ConnectionRejected(Exception):
    """The connection must be closed: per-IP count or per-IP rate exceeded."""

    def __init__(self, reason: str, throttle_ms: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.throttle_ms = throttle_ms


def parse_overrides(raw: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: 'host-or-ip:N,...'."""
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in (raw or "").split(","))):
        host, sep, n = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"Invalid max.connections.per.ip.overrides entry {item!r}")
        out[host.strip("[]")] = int(n)
    return out


@dataclass
class ListenerState:
    """One listener's open connections and counts of connections created, throttled and rejected."""

    count: int = 0
    rate: Sensor | None = None
    created: int = 0
    throttled: int = 0
    rejected: int = 0
    waiters: list[asyncio.Future[None]] = field(default_factory=list)


class ConnectionQuotas:
    def __init__(
        self,
        config: MetricConfig,
        *,
        max_connections: int = UNLIMITED,
        max_per_ip: int = UNLIMITED,
        per_ip_overrides: Mapping[str, int] | None = None,
        max_creation_rate: int = UNLIMITED,
        protected_listener: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or (lambda: time.monotonic() * 1000.0)
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides: dict[str, int] = dict(per_ip_overrides or {})
        self.protected_listener = protected_listener
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.listeners: dict[str, ListenerState] = {}
        self.broker_rate = Sensor(
            "broker-connection-accept-rate",
            config,
            None if max_creation_rate >= UNLIMITED else float(max_creation_rate),
        )
        self.ip_rate_quotas: dict[str | None, float] = {}  # ip (None = default) -> connections/s
        self.ip_rates: dict[str, Sensor] = {}
        self._slot_waiters: list[asyncio.Future[None]] = []

    # --- configuration -----------------------------------------------------------------
    def update_limits(
        self, *, max_connections: int, max_per_ip: int, per_ip_overrides: Mapping[str, int], max_creation_rate: int
    ) -> None:
        raised = max_connections > self.max_connections
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self.broker_rate.bound = None if max_creation_rate >= UNLIMITED else float(max_creation_rate)
        if raised:
            self._wake()

    def update_ip_quotas(self, quotas: Mapping[str | None, float]) -> None:
        self.ip_rate_quotas = dict(quotas)
        for ip, sensor in self.ip_rates.items():
            sensor.bound = self._ip_rate_bound(ip)

    def _ip_rate_bound(self, ip: str) -> float | None:
        bound = self.ip_rate_quotas.get(ip)
        if bound is None:
            bound = self.ip_rate_quotas.get(None)
        return bound

    def max_for_ip(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_per_ip)

    def _listener(self, name: str) -> ListenerState:
        st = self.listeners.get(name)
        if st is None:
            st = self.listeners[name] = ListenerState()
        return st

    def _protected(self, listener: str) -> bool:
        return self.protected_listener is not None and listener == self.protected_listener and len(self.listeners) > 1

    # --- admission ---------------------------------------------------------------------
    async def acquire(self, listener: str, ip: str) -> None:
        """Admit a connection (waiting for a broker slot / rate) or raise ConnectionRejected."""
        st = self._listener(listener)
        protected = self._protected(listener)
        while True:
            now = self.clock()
            if not protected and self.total >= self.max_connections:
                fut = asyncio.get_running_loop().create_future()
                self._slot_waiters.append(fut)
                try:
                    await wait_quietly(fut, 1.0)
                finally:
                    if fut in self._slot_waiters:
                        self._slot_waiters.remove(fut)
                continue
            if not protected:
                try:
                    self.broker_rate.record(1, now, True)
                except QuotaViolation as v:
                    self.broker_rate.record(-1, now, False)
                    delay = min(throttle_time_ms(v, self.broker_rate.window_size_ms(now)), self.config.window_ms)
                    st.throttled += 1
                    await asyncio.sleep(max(delay, 1) / 1000)
                    continue
            break
        self._record_ip(listener, ip, now, protected)
        self.total += 1
        st.count += 1
        st.created += 1
        n = self.per_ip.get(ip, 0) + 1
        self.per_ip[ip] = n
        if n > self.max_for_ip(ip):
            self.release(listener, ip)
            st.rejected += 1
            raise ConnectionRejected(f"Too many connections from {ip} (maximum = {self.max_for_ip(ip)})")

    def _record_ip(self, listener: str, ip: str, now: float, protected: bool) -> None:
        bound = self._ip_rate_bound(ip)
        sensor = self.ip_rates.get(ip)
        if sensor is None:
            if bound is None:
                return
            sensor = self.ip_rates[ip] = Sensor("connection-accept-rate", self.config, bound, tags=(ip, ""))
        self._expire_ip_sensors(now)
        try:
            sensor.record(1, now, True)
        except QuotaViolation as v:
            sensor.record(-1, now, False)
            if not protected:
                self.broker_rate.record(-1, now, False)
            st = self._listener(listener)
            st.rejected += 1
            delay = min(throttle_time_ms(v, sensor.window_size_ms(now)), self.config.window_ms)
            raise ConnectionRejected(f"Connection creation rate from {ip} exceeded {sensor.bound}/s", delay) from None

    def _expire_ip_sensors(self, now: float) -> None:
        if len(self.ip_rates) < 64:
            return
        for ip in [ip for ip, s in self.ip_rates.items() if now - s.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS]:
            del self.ip_rates[ip]

    def release(self, listener: str, ip: str) -> None:
        self.total = max(0, self.total - 1)
        st = self._listener(listener)
        st.count = max(0, st.count - 1)
        n = self.per_ip.get(ip, 0) - 1
        if n > 0:
            self.per_ip[ip] = n
        else:
            self.per_ip.pop(ip, None)
        self._wake()

    def _wake(self) -> None:
        for fut in self._slot_waiters:
            if not fut.done():
                fut.set_result(None)
        self._slot_waiters.clear()


def is_valid_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
