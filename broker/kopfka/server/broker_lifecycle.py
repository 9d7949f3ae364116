"""BrokerLifecycleManager (seed 000): registration, heartbeats, fencing, controlled shutdown.

States: NOT_RUNNING → STARTING → RECOVERY → RUNNING → PENDING_CONTROLLED_SHUTDOWN →
SHUTTING_DOWN. The broker registers with the active controller (getting a broker epoch),
then heartbeats every broker.heartbeat.interval.ms reporting its metadata offset; the
controller unfences it once caught up. On SIGTERM it asks to shut down and waits until the
controller has moved leadership away and every active broker has applied that (shouldShutDown)
before stopping.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kopfka.metadata import records as mr
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.timeouts import wait_quietly

if TYPE_CHECKING:
    from kopfka.metadata.image import MetadataDelta, MetadataImage

log = logging.getLogger(__name__)


class BrokerState(enum.Enum):
    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7


class RegistrationError(RuntimeError):
    """The broker could not register within initial.broker.registration.timeout.ms."""


class BrokerLifecycleManager:
    def __init__(
        self,
        node_id: int,
        cluster_id: str,
        controller: Any,
        *,
        endpoints: tuple[mr.Endpoint, ...],
        rack: str | None,
        log_dirs: tuple[str, ...],
        metadata_offset: Callable[[], int],
        heartbeat_interval_ms: int = 2000,
        registration_timeout_ms: int = 60000,
        ready_to_unfence: bool = True,
        cordoned_log_dirs: Callable[[], tuple[str, ...] | None] | None = None,
        offline_dir_timeout_ms: int = 30000,
        on_offline_dir_timeout: Callable[[], None] | None = None,
        previous_broker_epoch: int = -1,
    ) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.controller = controller
        self.endpoints = endpoints
        self.rack = rack
        self.log_dirs = log_dirs
        self.metadata_offset = metadata_offset
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.registration_timeout = registration_timeout_ms / 1000
        self.incarnation_id = str(uuid.uuid4())
        # the epoch of the last clean shutdown (the log dirs' .kafka_cleanshutdown), -1 after a crash
        self.previous_broker_epoch = previous_broker_epoch
        self.broker_epoch = -1
        self.state = BrokerState.NOT_RUNNING
        self.fenced = True
        self._want_shutdown = False
        self._shutdown_ok = asyncio.Event()
        self._unfenced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.ready_to_unfence = ready_to_unfence
        self._caught_up = asyncio.Event()
        # KIP-858: failed dirs are reported in every heartbeat; dir id -> acknowledged by the controller
        self.offline_dirs: dict[str, bool] = {}
        self._offline_timeout = offline_dir_timeout_ms / 1000
        self._on_offline_timeout = on_offline_dir_timeout
        self._offline_deadlines: list[asyncio.TimerHandle] = []
        self._wake = asyncio.Event()
        # cordoned dirs are reported once caught up (None: the controller is not told about them)
        self._cordoned = cordoned_log_dirs

    def set_state(self, state: BrokerState) -> None:
        if state != self.state:
            log.info("Broker %d transitioning from %s to %s", self.node_id, self.state.name, state.name)
            self.state = state

    async def start(self) -> None:
        """Register (STARTING) and start heartbeating; raises RegistrationError after
        initial.broker.registration.timeout.ms without a successful registration."""
        self.set_state(BrokerState.STARTING)
        await self._register(asyncio.get_running_loop().time() + self.registration_timeout)
        self._task = asyncio.create_task(self._heartbeat_loop(), name="broker-lifecycle-heartbeat")

    async def _register(self, deadline: float) -> None:
        while True:
            try:
                self.broker_epoch = await self.controller.register_broker(
                    self.node_id,
                    self.incarnation_id,
                    self.endpoints,
                    self.rack,
                    self.log_dirs,
                    self.cluster_id,
                    previous_broker_epoch=self.previous_broker_epoch,
                )
                break
            except KafkaError as exc:
                if asyncio.get_running_loop().time() > deadline:
                    raise RegistrationError(
                        f"Shutting down because broker {self.node_id} was unable to register with the controller "
                        f"quorum within initial.broker.registration.timeout.ms: {exc.message}"
                    ) from exc
                log.warning("Broker registration failed (%s); retrying", exc.message)
                await asyncio.sleep(min(self.heartbeat_interval, 0.5))
        log.info(
            "Broker %d registered with epoch %d (incarnation %s)", self.node_id, self.broker_epoch, self.incarnation_id
        )

    async def wait_caught_up(self) -> None:
        await self._caught_up.wait()

    async def wait_unfenced(self) -> None:
        await self._unfenced.wait()

    def set_ready_to_unfence(self) -> None:
        """Local state is loaded: stop asking to stay fenced (wantFence=false), in a heartbeat
        sent now rather than at the next tick (Kafka's scheduleNextCommunicationImmediately)."""
        self.ready_to_unfence = True
        self._wake.set()

    def propagate_directory_failure(self, directory_id: str) -> None:
        """A log dir failed: tell the controller in the next heartbeat, sent now. If the controller
        has not acknowledged it within the timeout, the broker must not keep running on a view the
        controller does not share: the shutdown hook runs (Kafka's OfflineDirBrokerFailureEvent)."""
        if not directory_id or directory_id in self.offline_dirs:
            return
        log.warning("Broker %d reporting offline log dir %s to the controller", self.node_id, directory_id)
        self.offline_dirs[directory_id] = False
        self._wake.set()
        if self._on_offline_timeout is not None:
            loop = asyncio.get_running_loop()
            self._offline_deadlines.append(loop.call_later(self._offline_timeout, self._check_offline_acked))

    def _check_offline_acked(self) -> None:
        pending = sorted(d for d, acked in self.offline_dirs.items() if not acked)
        if pending and self._on_offline_timeout is not None:
            log.error(
                "The controller did not acknowledge offline log dir(s) %s in time; shutting down", ", ".join(pending)
            )
            self._on_offline_timeout()

    def heartbeat_soon(self) -> None:
        """Send the next heartbeat now (a change the controller must hear of: cordoned dirs)."""
        self._wake.set()

    def _heartbeat_extras(self) -> dict[str, Any]:
        extras: dict[str, Any] = {}
        if self.offline_dirs:
            extras["offline_log_dirs"] = tuple(sorted(self.offline_dirs))
        if self._cordoned is not None and self._caught_up.is_set():
            cordoned = self._cordoned()
            if cordoned is not None:
                extras["cordoned_log_dirs"] = cordoned
        return extras

    async def _heartbeat_once(self) -> None:
        reported = [d for d, acked in self.offline_dirs.items() if not acked]
        res = await self.controller.broker_heartbeat(
            self.node_id,
            self.broker_epoch,
            self.metadata_offset(),
            not self.ready_to_unfence,
            self._want_shutdown,
            **self._heartbeat_extras(),
        )
        for d in reported:
            self.offline_dirs[d] = True  # a successful heartbeat carried it: acknowledged
        self.fenced = res.is_fenced
        if res.is_caught_up and self.state == BrokerState.STARTING:
            self.set_state(BrokerState.RECOVERY)
            self._caught_up.set()
        if not res.is_fenced and self.state == BrokerState.RECOVERY:
            self.set_state(BrokerState.RUNNING)
            self._unfenced.set()
        if self._want_shutdown and res.should_shutdown:
            self._shutdown_ok.set()

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                await self._heartbeat_once()
            except KafkaError as exc:
                log.warning("Broker heartbeat failed: %s", exc)
                if (
                    exc.code in (ErrorCode.stale_broker_epoch, ErrorCode.broker_id_not_registered)
                    and not self._want_shutdown
                ):
                    log.info("Broker %d re-registering with the controller", self.node_id)
                    try:
                        await self._register(asyncio.get_running_loop().time() + self.registration_timeout)
                    except RegistrationError:
                        log.exception("re-registration failed")
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("Broker heartbeat failed unexpectedly")
            delay = (
                0.05
                if self.state in (BrokerState.STARTING, BrokerState.RECOVERY) or self._want_shutdown
                else self.heartbeat_interval
            )
            await wait_quietly(self._wake.wait(), delay)  # a failed dir is reported at once
            self._wake.clear()

    async def controlled_shutdown(self, timeout_s: float = 30.0) -> None:
        """Ask the controller to move leadership away; wait until it says we may stop (once this
        broker and every other active one have applied the moves). The request goes out at once,
        not at the next heartbeat (Kafka's scheduleNextCommunicationImmediately)."""
        if self.broker_epoch < 0:
            return
        self.set_state(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
        self._want_shutdown = True
        self._wake.set()
        if not await wait_quietly(self._shutdown_ok.wait(), timeout_s):
            log.warning("Controlled shutdown did not complete within %.0fs; shutting down anyway", timeout_s)
        self.set_state(BrokerState.SHUTTING_DOWN)

    # --- metadata publisher --------------------------------------------------------------------
    name = "BrokerLifecycleManager"

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """A peer entered controlled shutdown: report our metadata offset now rather than at the next
        heartbeat. The controller lets the peer stop only once every active broker has applied the
        peer's leadership and ISR changes, so leaders stop waiting for it before it stops fetching."""
        for broker_id in delta.changed_brokers:
            now, before = image.brokers.get(broker_id), delta.image.brokers.get(broker_id)
            entering = now is not None and now.in_controlled_shutdown and not (before and before.in_controlled_shutdown)
            if broker_id != self.node_id and entering and self.broker_epoch >= 0:
                self._wake.set()

    async def close(self) -> None:
        for h in self._offline_deadlines:
            h.cancel()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
