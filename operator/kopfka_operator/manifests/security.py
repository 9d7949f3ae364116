"""The server.properties keys of a secured cluster (Kafka's names, docs/security.md).

The client listeners get the security protocol their `tls` and `authentication` ask for; the
operator's own listeners, REPLICATION (brokers to brokers, and the operator) and CONTROLLER
(the quorum, brokers to controllers), are SSL with client certificates required, trusting the
cluster CA only: every node presents its own pod's certificate both as a server and as a client,
and its principal (as the operator's) is a super user. A listener authenticating clients by
certificate trusts the clients CA instead, and maps the subject `CN=<user>` to the principal
`User:<user>`, the same principal a SCRAM user of that name gets.

The keystore differs per pod (`<TLS_DIR>/<pod>.pem`): the container passes it with
`--override`, as it does node.id.
"""

from __future__ import annotations

from ..naming import TLS_DIR, cert_principal, node_common_name, operator_common_name
from ..spec import Pool
from .common import Cluster

REPLICATION_LISTENER = "REPLICATION"
CONTROLLER_LISTENER = "CONTROLLER"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# A clients-CA certificate's subject is just CN=<user name> (User resources issue them).
USER_CERT_MAPPING = "RULE:^CN=([^,]+)$/$1/,DEFAULT"
CA_FILE = f"{TLS_DIR}/ca.crt"
CLIENTS_CA_FILE = f"{TLS_DIR}/clients-ca.crt"
KEYSTORE_TEMPLATE = f"{TLS_DIR}/${{POD_NAME}}.pem"  # expanded by the container's shell


def internal_protocol(cluster: Cluster) -> str:
    return "SSL" if cluster.spec.secured else "PLAINTEXT"


def super_users(cluster: Cluster) -> list[str]:
    """The nodes, the operator, then spec.authorization.superUsers."""
    users = [cert_principal(node_common_name(cluster.name)), cert_principal(operator_common_name(cluster.name))]
    if cluster.spec.authorization is not None:
        users += [f"User:{u}" for u in cluster.spec.authorization.super_users]
    return users


def security_properties(cluster: Cluster, pool: Pool) -> dict[str, str]:
    """Keys to add to the role's server.properties (none for an unsecured cluster)."""
    spec = cluster.spec
    if not spec.secured:
        return {}
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": CA_FILE,
    }
    internal = [CONTROLLER_LISTENER] + ([REPLICATION_LISTENER] if pool.is_broker else [])
    for name in internal:
        props[f"listener.name.{name.lower()}.ssl.client.auth"] = "required"
    if pool.is_broker:
        for lst in spec.listeners:
            prefix = f"listener.name.{lst.name.lower()}."
            if lst.mechanism:
                props[prefix + "sasl.enabled.mechanisms"] = lst.mechanism
            if lst.authentication == "tls":
                props[prefix + "ssl.client.auth"] = "required"
                props[prefix + "ssl.truststore.location"] = CLIENTS_CA_FILE
                props[prefix + "ssl.principal.mapping.rules"] = USER_CERT_MAPPING
    if spec.authorization is not None:
        props["authorizer.class.name"] = STANDARD_AUTHORIZER
        props["super.users"] = ";".join(super_users(cluster))
    return props
