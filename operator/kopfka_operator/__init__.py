"""kopfka's Kubernetes operator: KafkaCluster/Topic/Quota custom resources reconciled with kopf.

The broker side of the contract is `docs/runtime-contract.md`; everything the operator renders
(server.properties, command lines, probes) relies on exactly that and nothing else.
"""

GROUP = "kopfka.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

__all__ = ["API_VERSION", "GROUP", "VERSION"]
