"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topic and broker resources.

Every config is reported with its effective value — decided by the chain topic override, dynamic
per-broker, dynamic cluster default, static server.properties, default — and with the source and
synonyms Kafka reports for it (ConfigHelper's rules, checked against Kafka 4.3 by
tests/kafkaref/conformance.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopfka.config.definitions import OP_DELETE, AlterOpError, ConfigKey, apply_alter_op, format_value
from kopfka.config.dynamic_broker_config import DynamicConfigError, InvalidConfigValue, is_dynamic, valid_stored
from kopfka.config.group_config import GROUP_CONFIG, GROUP_RESOURCE, group_config_value
from kopfka.config.log_config import BROKER_SYNONYMS, SYNONYM_SCALE, TOPIC_CONFIG
from kopfka.config.server_config import SERVER_CONFIG
from kopfka.metadata.features import cordoned_log_dirs_supported
from kopfka.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, ResourceType, authorize, authorize_cluster
from kopfka.server.request_context import RequestContext
from kopfka.telemetry.subscriptions import CLIENT_METRICS_RESOURCE
from kopfka.telemetry.subscriptions import describe_entries as describe_client_metrics_entries

DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = (
    1,
    2,
    3,
    4,
    5,
)
CONFIG_TYPES = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}


Chain = tuple[str, str | None, int]  # (config name, value, source)


def _broker_layers(ctx: RequestContext, key: str) -> list[tuple[str, int]]:
    """(value, source) of a broker key, most specific first. A dynamic value counts only for a
    key Kafka lets change at runtime (one stored otherwise is ignored, as the broker ignores it)."""
    image = ctx.image
    node = str(ctx.services.node_id)
    layers = []
    if is_dynamic(key):
        per_broker = image.configs.get((BROKER_RESOURCE, node), {})
        if key in per_broker:
            layers.append((per_broker[key], DYNAMIC_BROKER_CONFIG))
        cluster = image.configs.get((BROKER_RESOURCE, ""), {})
        if key in cluster:
            layers.append((cluster[key], DYNAMIC_DEFAULT_BROKER_CONFIG))
    static = ctx.services.config.originals
    if key in static:
        layers.append((static[key], STATIC_BROKER_CONFIG))
    return layers


def _entry(
    name: str, value: str | None, source: int, defn: ConfigKey, synonyms: list[dict[str, Any]], read_only: bool
) -> dict[str, Any]:
    sensitive = defn.sensitive or defn.type == "password"
    if sensitive:  # a password's value never leaves the broker, not even as a synonym
        synonyms = [{**s, "value": None} for s in synonyms]
    return {
        "name": name,
        "value": None if sensitive else value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": sensitive,
        "synonyms": synonyms,
        "config_type": CONFIG_TYPES.get(defn.type, 0),
        "documentation": defn.doc or None,
        "is_default": source == DEFAULT_CONFIG,
    }


# Broker keys that are synonyms of each other (one setting in different units), most specific first.
BROKER_SYNONYM_GROUPS = {name: group for group in BROKER_SYNONYMS.values() if len(group) > 1 for name in group}


def _synonyms(ctx: RequestContext, names: tuple[str, ...], target: str, *, per_broker: bool = True) -> list[Chain]:
    """Kafka's synonym list (ConfigHelper.configSynonyms): every source in precedence order —
    per-broker dynamic, cluster-default dynamic, static, then the definition's non-null default —
    across all the synonym names, then everything before the first entry naming `target` dropped
    (so a unit variant set alone does not show as the synonym of the primary key)."""
    image = ctx.image
    tables = [
        (image.configs.get((BROKER_RESOURCE, str(ctx.services.node_id)), {}), DYNAMIC_BROKER_CONFIG),
        (image.configs.get((BROKER_RESOURCE, ""), {}), DYNAMIC_DEFAULT_BROKER_CONFIG),
        (ctx.services.config.originals, STATIC_BROKER_CONFIG),
    ]
    out: list[Chain] = [
        (n, table[n], source)
        for table, source in tables
        for n in names
        if n in table and (source == STATIC_BROKER_CONFIG or is_dynamic(n))  # stored non-dynamic keys: ignored
    ]
    for n in names:
        defn = SERVER_CONFIG.keys.get(n)
        if defn is not None and defn.default is not None:
            out.append((n, format_value(defn.default), DEFAULT_CONFIG))
    if not per_broker:
        out = [c for c in out if c[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
    while out and out[0][0] != target:
        out.pop(0)
    return out


def describe_topic_config_entries(
    ctx: RequestContext,
    topic: str,
    *,
    overrides: Mapping[str, str] | None = None,
    include_synonyms: bool = True,
    keys: list[str] | None = None,
) -> list[dict[str, Any]]:
    dynamic = dict(ctx.image.topic_config(topic)) if overrides is None else dict(overrides)
    out = []
    for key, defn in TOPIC_CONFIG.keys.items():
        if keys is not None and key not in keys:
            continue
        # the effective value: the most specific layer that sets the key or one of its broker synonyms
        chain: list[Chain] = []
        if key in dynamic:
            chain.append((key, dynamic[key], DYNAMIC_TOPIC_CONFIG))
        for syn in BROKER_SYNONYMS.get(key, ()):
            for value, source in _broker_layers(ctx, syn):
                chain.append((syn, value, source))
        chain.append((key, format_value(defn.default), DEFAULT_CONFIG))
        name0, value0, _ = chain[0]
        if name0 in SYNONYM_SCALE and value0 is not None:
            value0 = str(int(value0) * SYNONYM_SCALE[name0])
        # the reported source and synonyms: Kafka's (topic override, then the primary broker synonym's)
        names = BROKER_SYNONYMS.get(key, ())
        reported = ([(key, dynamic[key], DYNAMIC_TOPIC_CONFIG)] if key in dynamic else []) + (
            _synonyms(ctx, names, names[0]) if names else []
        )
        source = reported[0][2] if reported else DEFAULT_CONFIG
        synonyms = [{"name": n, "value": v, "source": s} for n, v, s in reported] if include_synonyms else []
        out.append(_entry(key, value0, source, defn, synonyms, False))
    return out


def describe_broker_config_entries(
    ctx: RequestContext, broker: str, *, include_synonyms: bool = True, keys: list[str] | None = None
) -> list[dict[str, Any]]:
    """A broker's configs (every key, with its source), or for the cluster default (`broker` "")
    the dynamic defaults that are set, as Kafka's ConfigHelper describes them. read_only is
    Kafka's: true unless the key is one of its dynamic broker configs."""
    out = []
    for key, defn in SERVER_CONFIG.keys.items():
        if keys is not None and key not in keys:
            continue
        layers = _broker_layers(ctx, key)
        if not broker:  # the cluster default: the dynamic defaults that are set (currentDynamicDefaultConfigs)
            layers = [(v, s) for v, s in layers if s == DYNAMIC_DEFAULT_BROKER_CONFIG]
            if not layers:
                continue
        value0 = layers[0][0] if layers else format_value(defn.default)
        reported = _synonyms(ctx, BROKER_SYNONYM_GROUPS.get(key, (key,)), key, per_broker=bool(broker))
        source = reported[0][2] if reported else DEFAULT_CONFIG
        synonyms = [{"name": n, "value": v, "source": s} for n, v, s in reported] if include_synonyms else []
        out.append(_entry(key, value0, source, defn, synonyms, not is_dynamic(key)))
    return out


GROUP_CONFIG_SOURCE = 8  # Kafka's ConfigSource.GROUP_CONFIG


def describe_group_config_entries(ctx: RequestContext, group: str, keys: list[str] | None) -> list[dict[str, Any]]:
    """Every group config: the group's override (source GROUP_CONFIG) or its default."""
    overrides = ctx.image.configs.get((GROUP_RESOURCE, group), {})
    broker = ctx.services.config.values
    out = []
    for key, defn in GROUP_CONFIG.keys.items():
        if keys is not None and key not in keys:
            continue
        source = GROUP_CONFIG_SOURCE if key in overrides else DEFAULT_CONFIG
        value = format_value(group_config_value(overrides, broker, key))
        out.append(_entry(key, value, source, defn, [{"name": key, "value": value, "source": source}], False))
    return out


def _config_access(ctx: RequestContext, op: AclOperation, rtype: int, name: str) -> ErrorCode | None:
    """Kafka's configs authorization: broker-level and client-metrics configs are the cluster's,
    a topic's its own; the error names what was refused."""
    if rtype == TOPIC_RESOURCE:
        return None if authorize(ctx, op, ResourceType.TOPIC, name) else ErrorCode.topic_authorization_failed
    if rtype == GROUP_RESOURCE:
        return None if authorize(ctx, op, ResourceType.GROUP, name) else ErrorCode.group_authorization_failed
    return None if authorize_cluster(ctx, op) else ErrorCode.cluster_authorization_failed


@api(32)
async def handle_describe_configs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    include_synonyms = getattr(req, "include_synonyms", False)
    results = []
    for res in req.resources:
        out: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": res.resource_type,
            "resource_name": res.resource_name,
            "configs": [],
        }
        keys = list(res.configuration_keys) if res.configuration_keys is not None else None
        try:
            refused = _config_access(ctx, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
            if refused is not None:
                raise KafkaError(refused)
            if res.resource_type == TOPIC_RESOURCE:
                if res.resource_name not in ctx.image.topics_by_name:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic {res.resource_name} does not exist")
                out["configs"] = describe_topic_config_entries(
                    ctx, res.resource_name, include_synonyms=include_synonyms, keys=keys
                )
            elif res.resource_type == BROKER_RESOURCE:
                if res.resource_name not in ("", str(ctx.services.node_id)):
                    raise KafkaError(
                        ErrorCode.invalid_request,
                        f"Unexpected broker id, expected {ctx.services.node_id} or empty string, "
                        f"but received {res.resource_name}",
                    )
                out["configs"] = describe_broker_config_entries(
                    ctx, res.resource_name, include_synonyms=include_synonyms, keys=keys
                )
            elif res.resource_type == CLIENT_METRICS_RESOURCE:  # KIP-714 subscriptions
                out["configs"] = describe_client_metrics_entries(ctx.image, res.resource_name, keys)
            elif res.resource_type == GROUP_RESOURCE:  # KIP-848/932 group configs
                out["configs"] = describe_group_config_entries(ctx, res.resource_name, keys)
            else:
                raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}")
        except KafkaError as exc:
            out["error_code"], out["error_message"] = exc.code, exc.message
        if not getattr(req, "include_documentation", False):  # as Kafka: documentation only when asked
            out["configs"] = [{**c, "documentation": None} for c in out["configs"]]
        results.append(out)
    return {"throttle_time": 0, "results": results}


@api(44)
async def handle_incremental_alter_configs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    resources = [
        (r.resource_type, r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs])
        for r in req.resources
    ]

    def broker_props(name: str, ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
        props = dict(ctx.image.configs.get((BROKER_RESOURCE, name), {}))
        props = valid_stored(props, per_broker=bool(name))
        for key, op, value in ops:
            defn = SERVER_CONFIG.keys.get(key)
            try:
                new = apply_alter_op(props.get(key), op, value, key, defn)
            except AlterOpError as exc:
                raise KafkaError(ErrorCode.invalid_request, str(exc)) from exc
            if new is None:
                props.pop(key, None)
            else:
                props[key] = new
        return props

    return await _alter(
        ctx,
        resources,
        broker_props,
        lambda allowed: ctx.services.controller.incremental_alter_configs(allowed, validate_only=req.validate_only),
    )


CORDONED_LOG_DIRS = "cordoned.log.dirs"


def _preprocess(ctx: RequestContext, rtype: int, name: str, change: Any, broker_props: Any) -> KafkaError | None:
    """What the receiving broker checks before forwarding (Kafka's ConfigAdminManager.preprocess):
    keys appear once; a BROKER resource is the cluster default or this broker, and its new dynamic
    config must be one this broker can apply (the keys Kafka lets change, values its components
    accept: thread counts at most doubled, connection limits > 0, ...)."""
    if isinstance(change, list):  # IncrementalAlterConfigs: (key, op, value)
        names = [op[0] for op in change]
        nulls = [key for key, op, value in change if op != OP_DELETE and value is None]
    else:  # AlterConfigs: {key: value}
        names = list(change)
        nulls = [key for key, value in change.items() if value is None]
    if len(set(names)) != len(names):
        return KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    if nulls:
        return KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")
    if rtype != BROKER_RESOURCE:
        return None
    node_id = ctx.services.node_id
    if name:
        try:
            broker_id = int(name)
        except ValueError:
            return KafkaError(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}")
        if broker_id != node_id:
            return KafkaError(
                ErrorCode.invalid_request, f"Unexpected broker id, expected {node_id}, but received {name}"
            )
    new_props = broker_props(name, change)
    cordoning = CORDONED_LOG_DIRS in names and new_props.get(CORDONED_LOG_DIRS)
    if cordoning and not cordoned_log_dirs_supported(ctx.image.features):
        # Kafka too: the controller would not record cordoned dirs below 4.3-IV0 (KIP-1066)
        return KafkaError(
            ErrorCode.invalid_config,
            f"{CORDONED_LOG_DIRS} needs metadata.version 4.3-IV0 or later "
            f"(level {ctx.image.features.get('metadata.version', 0)} is finalized)",
        )
    dynamic = ctx.services.dynamic_config
    if dynamic is None:
        return None
    try:
        dynamic.validate(new_props, per_broker=bool(name))
    except KafkaError as exc:
        return exc
    except InvalidConfigValue as exc:
        return KafkaError(ErrorCode.invalid_config, str(exc))
    except DynamicConfigError as exc:
        return KafkaError(ErrorCode.invalid_request, str(exc))
    return None


async def _alter(ctx: RequestContext, resources: list[Any], broker_props: Any, call: Any) -> dict[str, Any]:
    """ALTER_CONFIGS on each resource (the cluster's for brokers); refused ones never reach the controller."""
    refused: dict[int, tuple[ErrorCode, str | None] | None] = {}
    for i, (rtype, name, change) in enumerate(resources):
        code = _config_access(ctx, AclOperation.ALTER_CONFIGS, rtype, name)
        if code is not None:
            refused[i] = (code, None)
            continue
        problem = _preprocess(ctx, rtype, name, change, broker_props)
        refused[i] = (problem.code, problem.message) if problem is not None else None
    allowed = [r for i, r in enumerate(resources) if refused[i] is None]
    done = iter(await call(allowed) if allowed else [])
    responses = []
    for i, (rtype, name, _) in enumerate(resources):
        error = refused[i]
        if error is not None:
            responses.append(
                {"error_code": error[0], "error_message": error[1], "resource_type": rtype, "resource_name": name}
            )
            continue
        r = next(done)
        responses.append(
            {
                "error_code": r.error,
                "error_message": r.message,
                "resource_type": r.resource_type,
                "resource_name": r.name,
            }
        )
    return {"throttle_time": 0, "responses": responses}


@api(33)
async def handle_alter_configs(ctx: RequestContext, req: Any) -> dict[str, Any]:
    """Legacy AlterConfigs: the given set replaces the resource's whole dynamic config."""
    resources = [(r.resource_type, r.resource_name, {c.name: c.value for c in r.configs}) for r in req.resources]

    def broker_props(name: str, values: dict[str, str | None]) -> dict[str, str]:
        return {k: v for k, v in values.items() if v is not None}

    return await _alter(
        ctx,
        resources,
        broker_props,
        lambda allowed: ctx.services.controller.alter_configs(allowed, validate_only=req.validate_only),
    )


# --- ListConfigResources (KIP-1142; v0 is KIP-714's ListClientMetricsResources) ---------------
LIST_CONFIG_RESOURCES = 74
EXTRA_APIS[LIST_CONFIG_RESOURCES] = (0, 1)
BROKER_LOGGER_RESOURCE = 8
# in the order Kafka lists them
LISTED_RESOURCE_TYPES = (
    GROUP_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    BROKER_LOGGER_RESOURCE,
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
)


@api(LIST_CONFIG_RESOURCES)
async def handle_list_config_resources(ctx: RequestContext, req: Any) -> dict[str, Any]:
    """The resources that can hold configs: groups and client-metrics subscriptions with dynamic
    configs, every broker (as BROKER and BROKER_LOGGER) and every topic. v0 knows client metrics only."""
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "config_resources": []}
    supported = (CLIENT_METRICS_RESOURCE,) if ctx.api_version == 0 else LISTED_RESOURCE_TYPES
    types = {int(t) for t in getattr(req, "resource_types", ())} or set(supported)
    if not types <= set(supported):
        return {"throttle_time": 0, "error_code": ErrorCode.unsupported_version, "config_resources": []}
    image = ctx.image
    brokers = [str(b.broker_id) for b in image.brokers.values() if b.endpoint(ctx.listener_name) is not None]
    names_by_type = {
        GROUP_RESOURCE: sorted(name for rtype, name in image.configs if rtype == GROUP_RESOURCE),
        CLIENT_METRICS_RESOURCE: sorted(name for rtype, name in image.configs if rtype == CLIENT_METRICS_RESOURCE),
        BROKER_LOGGER_RESOURCE: brokers,
        BROKER_RESOURCE: brokers,
        TOPIC_RESOURCE: sorted(image.topics_by_name),
    }
    resources = [
        {"resource_name": name, "resource_type": rtype}
        for rtype in LISTED_RESOURCE_TYPES
        if rtype in types
        for name in names_by_type[rtype]
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "config_resources": resources}
