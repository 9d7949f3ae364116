"""meta.properties: what a log dir was formatted for (seed 000: version 1, KRaft).

Every dir in log.dirs and the metadata dir carries one:
  version=1, cluster.id=<id>, node.id=<n>, directory.id=<uuid>
A node refuses to start when a dir is missing it or names another cluster or node.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from kopfka import uuids

META_PROPERTIES = "meta.properties"


class MetaPropertiesError(Exception):
    """A dir is unformatted or formatted for something else; the message names the dir."""


@dataclass(frozen=True)
class MetaProperties:
    """The contents of a dir's meta.properties: the cluster, node and directory it was formatted for."""

    cluster_id: str
    node_id: int
    directory_id: str
    version: int = 1

    def render(self) -> str:
        return (
            "#\n"
            f"#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
            f"node.id={self.node_id}\n"
            f"directory.id={self.directory_id}\n"
            f"version={self.version}\n"
            f"cluster.id={self.cluster_id}\n"
        )


def read(log_dir: Path) -> MetaProperties | None:
    path = log_dir / META_PROPERTIES
    if not path.exists():
        return None
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        props[k.strip()] = v.strip()
    try:
        version = int(props.get("version", "0"))
        if version != 1:
            raise MetaPropertiesError(f"{path}: unsupported meta.properties version {version} (KRaft needs 1)")
        return MetaProperties(
            cluster_id=props["cluster.id"],
            node_id=int(props["node.id"]),
            directory_id=props.get("directory.id") or "",
            version=version,
        )
    except (KeyError, ValueError) as exc:
        raise MetaPropertiesError(f"{path}: malformed meta.properties ({exc})") from exc


def write(log_dir: Path, meta: MetaProperties) -> None:
    """Crash-consistent write: temp file, fsync, rename, fsync dir."""
    log_dir.mkdir(parents=True, exist_ok=True)
    tmp = log_dir / (META_PROPERTIES + ".tmp")
    with open(tmp, "w") as f:
        f.write(meta.render())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, log_dir / META_PROPERTIES)
    fd = os.open(log_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def verify(dirs: list[Path], node_id: int, cluster_id: str | None = None) -> dict[Path, MetaProperties]:
    """Check every dir is formatted for this node (and one cluster). Returns dir -> meta."""
    found: dict[Path, MetaProperties] = {}
    for d in dirs:
        meta = read(d)
        if meta is None:
            raise MetaPropertiesError(
                f"No meta.properties found in {d} (have you run `kopfka storage format` for this node?)"
            )
        if meta.node_id != node_id:
            raise MetaPropertiesError(
                f"Stored node id {meta.node_id} in {d} doesn't match node.id {node_id}: "
                "the dir belongs to another node (re-format it or fix node.id)"
            )
        if cluster_id is not None and meta.cluster_id != cluster_id:
            raise MetaPropertiesError(
                f"Invalid cluster.id in {d}: expected {cluster_id}, found {meta.cluster_id}; "
                "the log dirs were formatted for different clusters"
            )
        cluster_id = meta.cluster_id
        found[d] = meta
    ids = [m.directory_id for m in found.values()]
    if len(set(ids)) != len(ids):
        raise MetaPropertiesError("Two log dirs share one directory.id: " + ", ".join(str(d) for d in found))
    return found


def new_directory_id() -> str:
    return uuids.to_str(uuids.random_uuid())
