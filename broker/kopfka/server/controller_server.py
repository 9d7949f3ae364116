"""The controller listener: KRaft quorum RPCs, broker lifecycle RPCs and forwarded admin requests.

It is a second network server with its own handler table (`CONTROLLER_APIS`): a Fetch here is
the raft fetch of `__cluster_metadata`, never a client fetch. Brokers forward CreateTopics,
DeleteTopics, CreatePartitions, AlterConfigs and IncrementalAlterConfigs as plain requests (no
Envelope: there is no principal to carry yet) to the active controller; a follower answers
NOT_CONTROLLER and the broker retries against the new leader.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader

from kopfka import uuids
from kopfka.controller.quorum_controller import CreateTopicSpec, QuorumController
from kopfka.metadata import records as mr
from kopfka.metadata.features import supported_features_list
from kopfka.protocol.api_versions import API_VERSIONS_KEY, CONTROLLER_APIS
from kopfka.protocol.entity_builder import build
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.framing import FrameError, encode_response, peek_header
from kopfka.protocol.request_guard import check_body
from kopfka.protocol.schemas import load_request_schema, load_response_schema
from kopfka.raft.kafka_raft import KafkaRaftClient
from kopfka.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kopfka.security.authorizer import StandardAuthorizer
from kopfka.server.apis.features import feature_updates, update_features_response
from kopfka.server.apis.quotas import alter_client_quotas_response
from kopfka.server.apis.sasl import illegal_authenticate, illegal_handshake
from kopfka.server.controller_errors import controller_error_response
from kopfka.server.network import Connection, KafkaNetworkServer

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
# replication RPCs: AlterPartition (leaders' ISR changes) and the forwarded admin requests;
# DescribeCluster from v1 (endpoint_type) for admin clients bootstrapped on controllers (KIP-919)
CONTROLLER_APIS.update({43: (0, 2), 45: (0, 0), 46: (0, 0), 56: (2, 3), 60: (1, 2)})
CONTROLLER_ENDPOINT_TYPE = 2
SECURITY_PROTOCOL_IDS = {v: k for k, v in SECURITY_PROTOCOLS.items()}


@dataclass
class ControllerServices:
    """What the controller listener's handlers reach: the raft client, the QuorumController and the authorizer."""

    node_id: int
    cluster_id: str
    raft: KafkaRaftClient
    controller: QuorumController
    quota_manager: Any = None  # the network layer's connection quotas do not apply here
    authorizer: StandardAuthorizer | None = None  # over the controller's own image

    def built(self, name: str) -> None:
        """No coordinator lives behind the controller listener (BrokerServices.built's counterpart,
        which a closing connection asks for its share-partition manager)."""
        return None


# answered to any authenticated peer; everything else on the controller listener is node-to-node
# traffic (raft, lifecycle, requests forwarded by brokers after their own ACL checks) and needs
# CLUSTER_ACTION on the cluster — except the admin requests Kafka's controllers serve clients
# bootstrapped on them (KIP-919), which need Kafka's operation on the cluster
OPEN_CONTROLLER_APIS = {API_VERSIONS_KEY, 17, 36}
CLIENT_CONTROLLER_APIS = {
    55: AclOperation.DESCRIBE,  # DescribeQuorum
    60: AclOperation.ALTER,  # DescribeCluster: ALTER on a controller (Kafka's ControllerApis), not DESCRIBE
    57: AclOperation.ALTER,  # UpdateFeatures
    80: AclOperation.ALTER,  # AddRaftVoter
    81: AclOperation.ALTER,  # RemoveRaftVoter
}


def controller_request_allowed(svc: ControllerServices, principal: Any, host: str, api_key: int) -> bool:
    authz = svc.authorizer
    if authz is None or api_key in OPEN_CONTROLLER_APIS:
        return True
    if authz.authorize(
        principal, host, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ):
        return True
    op = CLIENT_CONTROLLER_APIS.get(api_key)
    return op is not None and authz.authorize(principal, host, op, ResourceType.CLUSTER, CLUSTER_NAME)


QUORUM_RPCS = frozenset({1, 52, 53, 54, 59})  # Fetch, Vote, Begin/EndQuorumEpoch, FetchSnapshot
ControllerHandler = Callable[[ControllerServices, int, Any], Awaitable[dict[str, Any]]]
CONTROLLER_HANDLERS: dict[int, ControllerHandler] = {}


def controller_api(key: int) -> Callable[[ControllerHandler], ControllerHandler]:
    def reg(fn: ControllerHandler) -> ControllerHandler:
        CONTROLLER_HANDLERS[key] = fn
        return fn

    return reg


class ControllerConnection(Connection):
    async def handle_frame(self, frame: bytes | bytearray) -> bool:
        frame = bytes(frame)
        api_key, version, corr = peek_header(frame)
        rng = CONTROLLER_APIS.get(api_key)
        if rng is None or not rng[0] <= version <= rng[1]:
            if api_key == API_VERSIONS_KEY:
                body = build(load_response_schema(API_VERSIONS_KEY, 0), _api_versions(ErrorCode.unsupported_version))
                self.write(encode_response(API_VERSIONS_KEY, 0, corr, body))
                await self.drain()
                return True
            log.warning(
                "Closing controller connection from %s: unsupported request %s v%s", self.peer, api_key, version
            )
            return False
        schema = load_request_schema(api_key, version)
        header_cls = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
        try:
            _, hsize = entity_reader(header_cls)(frame, 0)
            check_body(schema, frame, hsize)  # as decode_request: kio must never see a lying count
            req, _ = entity_reader(schema)(frame, hsize)
        except Exception as exc:  # kio raises assorted errors on malformed input
            raise FrameError(f"cannot parse {schema.__name__} v{version}: {exc}") from exc
        svc = self.server.services
        if not controller_request_allowed(svc, self.principal, self.client_host, api_key):
            # answered with the request's own error response, as Kafka's ControllerApis does: the
            # connection stays open and the peer (a broker's start, an admin tool) learns why
            assert isinstance(self.server, ControllerNetworkServer)
            self.server.log_refusal(self.principal, schema.__name__)
            message = f"Request {schema.__name__} v{version} from {self.principal} is not authorized."
            refusal = controller_error_response(api_key, version, req, ErrorCode.cluster_authorization_failed, message)
            self.write(encode_response(api_key, version, corr, build(load_response_schema(api_key, version), refusal)))
            await self.drain()
            return True
        if api_key in QUORUM_RPCS and svc.raft.isolated:
            return False  # the test-only network partition: the request is lost, the connection drops
        handler = CONTROLLER_HANDLERS[api_key]
        result = await handler(svc, version, req)
        self.write(encode_response(api_key, version, corr, build(load_response_schema(api_key, version), result)))
        await self.drain()
        return True


class ControllerNetworkServer(KafkaNetworkServer):
    """KafkaNetworkServer whose connections dispatch to the controller handler table."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refusals_logged: set[tuple[str, str]] = set()

    def log_refusal(self, principal: Any, api: str) -> None:
        """A refused request is logged once per principal and API: a peer that retries (a broker's
        heartbeats, a raft fetch loop) must not flood the log."""
        key = (str(principal), api)
        if key not in self.refusals_logged:
            self.refusals_logged.add(key)
            log.warning("%s may not send %s to the controller (not authorized on the cluster)", principal, api)

    async def start_listener(self, name: str, host: str, port: int) -> tuple[str, int]:
        server = await self._create_server(lambda: ControllerConnection(self, name), name, host, port)
        self.servers.append(server)
        sock = server.sockets[0].getsockname()
        self.bound[name] = (sock[0], sock[1])
        log.info("Controller listener %s on %s:%d", name, sock[0], sock[1])
        return sock[0], sock[1]


def _api_versions(error: ErrorCode = ErrorCode.none) -> dict[str, Any]:
    return {
        "error_code": error,
        "throttle_time": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(CONTROLLER_APIS.items())
        ],
        "supported_features": supported_features_list(),
        "finalized_features_epoch": -1,
        "finalized_features": [],
        "zk_migration_ready": False,
    }


@controller_api(18)
async def _h_api_versions(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    return _api_versions()


CONTROLLER_APIS.update({17: (0, 1), 36: (0, 2)})  # SaslHandshake, SaslAuthenticate (see apis/sasl.py)


@controller_api(17)
async def _h_sasl_handshake(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    return illegal_handshake()


@controller_api(36)
async def _h_sasl_authenticate(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    return illegal_authenticate()


# --- quorum RPCs ------------------------------------------------------------------------------
@controller_api(52)
async def _h_vote(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    return svc.raft.handle_vote(req)


@controller_api(53)
async def _h_begin(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    return svc.raft.handle_begin_quorum_epoch(req)


@controller_api(54)
async def _h_end(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    return svc.raft.handle_end_quorum_epoch(req)


@controller_api(1)
async def _h_fetch(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    return await svc.raft.handle_fetch(req)


@controller_api(59)
async def _h_fetch_snapshot(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    return svc.raft.handle_fetch_snapshot(req)


@controller_api(55)
async def _h_describe_quorum(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    return svc.raft.handle_describe_quorum(req)


@controller_api(60)
async def _h_describe_cluster(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    """KIP-919: a controller describes the controller quorum (its voters, their controller
    endpoints) so `--bootstrap-controller` admin clients find every controller."""
    resp: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": req.endpoint_type,
        "cluster_id": svc.cluster_id,
        "controller_id": -1,
        "brokers": [],
        "cluster_authorized_operations": -(2**31),  # omitted
    }
    if req.endpoint_type != CONTROLLER_ENDPOINT_TYPE:
        resp["error_code"] = ErrorCode.unsupported_endpoint_type
        resp["error_message"] = "The controller only supports endpoint type CONTROLLER (2)"
        return resp
    voters = svc.raft.voters
    resp["controller_id"] = svc.raft.leader_id if svc.raft.leader_id in voters else -1
    resp["brokers"] = [
        {"broker_id": v.node_id, "host": v.host, "port": v.port, "rack": None, "is_fenced": False}
        for v in sorted(voters.values(), key=lambda v: v.node_id)
    ]
    return resp


@controller_api(80)
async def _h_add_voter(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    if req.cluster_id is not None and req.cluster_id != svc.cluster_id:
        return {"throttle_time": 0, "error_code": ErrorCode.inconsistent_cluster_id, "error_message": None}
    lst = next((x for x in req.listeners), None)
    if lst is None:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "error_message": "no listener given"}
    dir_id = uuids.to_str(req.voter_directory_id) if req.voter_directory_id is not None else ""
    code, msg = await svc.raft.add_voter(int(req.voter_id), dir_id, lst.host, int(lst.port))
    return {"throttle_time": 0, "error_code": code, "error_message": msg}


@controller_api(81)
async def _h_remove_voter(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    if req.cluster_id is not None and req.cluster_id != svc.cluster_id:
        return {"throttle_time": 0, "error_code": ErrorCode.inconsistent_cluster_id, "error_message": None}
    dir_id = uuids.to_str(req.voter_directory_id) if req.voter_directory_id is not None else None
    code, msg = await svc.raft.remove_voter(int(req.voter_id), dir_id)
    return {"throttle_time": 0, "error_code": code, "error_message": msg}


# --- features -------------------------------------------------------------------------------------
@controller_api(57)
async def _h_update_features(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    updates = feature_updates(req, v)
    try:
        code, message = await svc.controller.update_features(updates, validate_only=bool(req.validate_only))
    except KafkaError as exc:  # NOT_CONTROLLER: the forwarding broker retries at the active one
        return controller_error_response(57, v, req, exc.code, exc.message)
    return update_features_response([u[0] for u in updates], code, message)


# --- broker lifecycle RPCs ------------------------------------------------------------------------
@controller_api(62)
async def _h_register(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    endpoints = tuple(
        mr.Endpoint(lst.name, lst.host, int(lst.port), SECURITY_PROTOCOLS.get(int(lst.security_protocol), "PLAINTEXT"))
        for lst in req.listeners
    )
    log_dirs = tuple(uuids.to_str(d) for d in getattr(req, "log_dirs", ()) if d is not None)
    try:
        features = tuple((f.name, int(f.min_supported_version), int(f.max_supported_version)) for f in req.features)
        epoch = await svc.controller.register_broker(
            int(req.broker_id),
            str(req.incarnation_id),
            endpoints,
            req.rack,
            log_dirs,
            req.cluster_id,
            features,
            previous_broker_epoch=int(getattr(req, "previous_broker_epoch", -1)),
        )
        return {"throttle_time": 0, "error_code": ErrorCode.none, "broker_epoch": epoch}
    except KafkaError as exc:
        log.info("BrokerRegistration of %d refused: %s", req.broker_id, exc.message)
        return controller_error_response(62, v, req, exc.code, exc.message)


@controller_api(63)
async def _h_heartbeat(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    try:
        res = await svc.controller.broker_heartbeat(
            int(req.broker_id),
            int(req.broker_epoch),
            int(req.current_metadata_offset),
            bool(req.want_fence),
            bool(req.want_shut_down),
            offline_log_dirs=tuple(uuids.to_str(d) for d in getattr(req, "offline_log_dirs", None) or ()),
            cordoned_log_dirs=(
                None
                if getattr(req, "cordoned_log_dirs", None) is None
                else tuple(uuids.to_str(d) for d in req.cordoned_log_dirs)
            ),
        )
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "is_caught_up": res.is_caught_up,
            "is_fenced": res.is_fenced,
            "should_shut_down": res.should_shutdown,
        }
    except KafkaError as exc:
        return controller_error_response(63, v, req, exc.code, exc.message)


@controller_api(64)
async def _h_unregister(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    try:
        await svc.controller.unregister_broker(int(req.broker_id))
        return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None}
    except KafkaError as exc:
        return controller_error_response(64, v, req, exc.code, exc.message)


@controller_api(67)
async def _h_alloc_pids(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    try:
        start, length = await svc.controller.allocate_producer_ids(int(req.broker_id), int(req.broker_epoch))
        return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id_start": start, "producer_id_len": length}
    except KafkaError as exc:
        return controller_error_response(67, v, req, exc.code, exc.message)


@controller_api(73)
async def _h_assign_dirs(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    wanted = [
        (uuids.to_str(d.id_), uuids.to_str(t.topic_id), int(p.partition_index))
        for d in req.directories
        for t in d.topics
        for p in t.partitions
    ]
    try:
        res = await svc.controller.assign_replicas_to_dirs(int(req.broker_id), int(req.broker_epoch), wanted)
    except KafkaError as exc:
        return controller_error_response(73, v, req, exc.code, exc.message)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "directories": [
            {
                "id_": d.id_,
                "topics": [
                    {
                        "topic_id": t.topic_id,
                        "partitions": [
                            {
                                "partition_index": p.partition_index,
                                "error_code": res.get(
                                    (uuids.to_str(t.topic_id), int(p.partition_index)), ErrorCode.none
                                ),
                            }
                            for p in t.partitions
                        ],
                    }
                    for t in d.topics
                ],
            }
            for d in req.directories
        ],
    }


# --- forwarded admin requests -------------------------------------------------------------------
@controller_api(19)
async def _h_create_topics(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    specs = [
        CreateTopicSpec(
            t.name,
            t.num_partitions,
            t.replication_factor,
            {a.partition_index: list(a.broker_ids) for a in t.assignments} if t.assignments else None,
            {c.name: c.value for c in t.configs},
        )
        for t in req.topics
    ]
    try:
        results = await svc.controller.create_topics(specs, validate_only=bool(getattr(req, "validate_only", False)))
    except KafkaError as exc:
        return controller_error_response(19, v, req, exc.code, exc.message)
    out = []
    for r in results:
        ok = r.error == ErrorCode.none
        out.append(
            {
                "name": r.name,
                "error_code": r.error,
                "error_message": r.message,
                "topic_id": uuids.from_str(r.topic_id) if ok and r.topic_id else uuids.ZERO_UUID,
                "num_partitions": r.num_partitions if ok else -1,
                "replication_factor": r.replication_factor if ok else -1,
                "configs": [
                    {"name": k, "value": val, "read_only": False, "config_source": 1, "is_sensitive": False}
                    for k, val in r.configs.items()
                ]
                if ok
                else None,
            }
        )
    return {"throttle_time": 0, "topics": out}


@controller_api(20)
async def _h_delete_topics(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    names = [t.name for t in req.topics if t.name is not None]
    ids = [uuids.to_str(t.topic_id) for t in req.topics if t.name is None and t.topic_id is not None]
    try:
        results = await svc.controller.delete_topics(names, ids)
    except KafkaError as exc:
        return controller_error_response(20, v, req, exc.code, exc.message)
    return {
        "throttle_time": 0,
        "responses": [
            {
                "name": r.name or None,
                "topic_id": uuids.from_str(r.topic_id) if r.topic_id else uuids.ZERO_UUID,
                "error_code": r.error,
                "error_message": r.message,
            }
            for r in results
        ],
    }


@controller_api(37)
async def _h_create_partitions(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    reqs = [
        (t.name, t.count, [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None)
        for t in req.topics
    ]
    try:
        results = await svc.controller.create_partitions(reqs, validate_only=req.validate_only)
    except KafkaError as exc:
        return controller_error_response(37, v, req, exc.code, exc.message)
    return {
        "throttle_time": 0,
        "results": [{"name": r.name, "error_code": r.error, "error_message": r.message} for r in results],
    }


def _config_results(results: list[Any]) -> list[dict[str, Any]]:
    return [
        {"error_code": r.error, "error_message": r.message, "resource_type": r.resource_type, "resource_name": r.name}
        for r in results
    ]


async def _alter_config_response(alter: Any, resources: list[Any], key: int, v: int, req: Any) -> dict[str, Any]:
    """Run a config alteration; a controller-level error (e.g. NOT_CONTROLLER) answers every resource."""
    try:
        results = await alter(resources, validate_only=req.validate_only)
    except KafkaError as exc:
        return controller_error_response(key, v, req, exc.code, exc.message)
    return {"throttle_time": 0, "responses": _config_results(results)}


@controller_api(44)
async def _h_incremental_alter(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    resources = [
        (int(r.resource_type), r.resource_name, [(c.name, int(c.config_operation), c.value) for c in r.configs])
        for r in req.resources
    ]
    return await _alter_config_response(svc.controller.incremental_alter_configs, resources, 44, v, req)


@controller_api(33)
async def _h_alter(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    resources = [(int(r.resource_type), r.resource_name, {c.name: c.value for c in r.configs}) for r in req.resources]
    return await _alter_config_response(svc.controller.alter_configs, resources, 33, v, req)


@controller_api(49)
async def _h_alter_client_quotas(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    from kopfka.controller.client_quota_control import QuotaAlteration

    alterations = [
        QuotaAlteration(
            tuple((e.entity_type, e.entity_name) for e in entry.entity),
            [(op.key, None if op.remove else float(op.value)) for op in entry.ops],
        )
        for entry in req.entries
    ]
    try:
        results = await svc.controller.alter_client_quotas(alterations, bool(req.validate_only))
    except KafkaError as exc:
        return controller_error_response(49, v, req, exc.code, exc.message)
    return alter_client_quotas_response(results)


# --- security: ACLs and SCRAM credentials (forwarded by brokers) -----------------------------------
CONTROLLER_APIS.update({30: (1, 3), 31: (1, 3), 51: (0, 0)})


@controller_api(30)
async def _h_create_acls(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    from kopfka.server.apis.acls import acl_from_creation

    try:
        results = await svc.controller.create_acls([acl_from_creation(c) for c in req.creations])
    except KafkaError as exc:
        return controller_error_response(30, v, req, exc.code, exc.message)
    return {"throttle_time": 0, "results": [{"error_code": r.error, "error_message": r.message} for r in results]}


@controller_api(31)
async def _h_delete_acls(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    from kopfka.server.apis.acls import filter_from_wire, matching_acl_dict

    try:
        results = await svc.controller.delete_acls([filter_from_wire(f) for f in req.filters])
    except KafkaError as exc:
        return controller_error_response(31, v, req, exc.code, exc.message)
    return {
        "throttle_time": 0,
        "filter_results": [
            {
                "error_code": r.error,
                "error_message": r.message,
                "matching_acls": [matching_acl_dict(m) for m in r.matched],
            }
            for r in results
        ],
    }


@controller_api(51)
async def _h_alter_scram(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    from kopfka.server.apis.user_scram import deletions_of, upsertions_of

    try:
        results = await svc.controller.alter_user_scram_credentials(deletions_of(req), upsertions_of(req))
    except KafkaError as exc:
        return controller_error_response(51, v, req, exc.code, exc.message)
    return {
        "throttle_time": 0,
        "results": [{"user": r.user, "error_code": r.error, "error_message": r.message} for r in results],
    }


# --- replication ----------------------------------------------------------------------------------
@controller_api(56)
async def _h_alter_partition(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    topics = []
    try:
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if v >= 3:
                    isr = [(int(b.broker_id), int(b.broker_epoch)) for b in p.new_isr_with_epochs]
                else:
                    isr = [(int(b), -1) for b in p.new_isr]
                r = await svc.controller.alter_partition(
                    int(req.broker_id),
                    int(req.broker_epoch),
                    uuids.to_str(t.topic_id),
                    int(p.partition_index),
                    int(p.leader_epoch),
                    int(p.partition_epoch),
                    isr,
                )
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": r.error,
                        "leader_id": r.leader,
                        "leader_epoch": r.leader_epoch,
                        "isr": list(r.isr),
                        "leader_recovery_state": 0,
                        "partition_epoch": r.partition_epoch,
                    }
                )
            topics.append({"topic_id": t.topic_id, "partitions": parts})
    except KafkaError as exc:
        return controller_error_response(56, v, req, exc.code, exc.message)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "topics": topics}


@controller_api(43)
async def _h_elect_leaders(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    wanted = (
        None
        if req.topic_partitions is None
        else [(t.topic, int(p)) for t in req.topic_partitions for p in t.partitions]
    )
    try:
        results = await svc.controller.elect_leaders(int(getattr(req, "election_type", 0)), wanted)
    except KafkaError as exc:
        return controller_error_response(43, v, req, exc.code, exc.message)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            {"partition_id": r.partition, "error_code": r.error, "error_message": r.message}
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()],
    }


@controller_api(45)
async def _h_alter_reassignments(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    items = [
        (t.name, int(p.partition_index), None if p.replicas is None else [int(r) for r in p.replicas])
        for t in req.topics
        for p in t.partitions
    ]
    try:
        results = await svc.controller.alter_partition_reassignments(items)
    except KafkaError as exc:
        return controller_error_response(45, v, req, exc.code, exc.message)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            {"partition_index": r.partition, "error_code": r.error, "error_message": r.message}
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }


@controller_api(46)
async def _h_list_reassignments(svc: ControllerServices, v: int, req: Any) -> dict[str, Any]:
    wanted = None if req.topics is None else [(t.name, int(p)) for t in req.topics for p in t.partition_indexes]
    try:
        ongoing = await svc.controller.list_partition_reassignments(wanted)
    except KafkaError as exc:
        return controller_error_response(46, v, req, exc.code, exc.message)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for o in ongoing:
        by_topic.setdefault(o.topic, []).append(
            {
                "partition_index": o.partition,
                "replicas": list(o.replicas),
                "adding_replicas": list(o.adding),
                "removing_replicas": list(o.removing),
            }
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
