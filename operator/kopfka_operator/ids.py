"""Kafka UUIDs for the cluster id and the initial voters' metadata directory ids."""

from __future__ import annotations

import base64
import uuid

from .naming import CONTROLLER_PORT, node_id_base, pod_host
from .spec import Pool


def new_kafka_uuid() -> str:
    """A random UUID as Kafka prints it: 22 base64url characters, no padding.

    Like Kafka, never hand out one starting with '-' (a CLI would read it as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def initial_controllers(cluster: str, namespace: str, voters: Pool) -> str:
    """`--initial-controllers` for the first voters: ID@HOST:PORT:DIRECTORY_ID,...

    The directory ids are generated here, once, and kept with the cluster id: every voter
    formats its metadata dir with its own entry, so all of them agree on the voter set."""
    base = node_id_base(voters.role)
    hosts = [pod_host(cluster, voters.role, i, namespace) for i in range(voters.replicas)]
    return ",".join(f"{base + i}@{host}:{CONTROLLER_PORT}:{new_kafka_uuid()}" for i, host in enumerate(hosts))
