"""How each component of the test bed is configured and started, in start order.

Settings that depart from a default Kubernetes install, and why:
- the API server binds to the pod bridge's gateway (pods must reach it; nothing else does);
- one node named `localhost`; its IP is the bridge's gateway too (a node IP may not be
  loopback), where the kubelet serves the API server (client certificates required);
- containerd's CRI sets `restrict_oom_score_adj` (this host refuses oom_score_adj writes);
- the kubelet accepts this host's cgroup v1 hierarchy (`failCgroupV1: false`) and has eviction
  thresholds at 1% so a busy shared disk does not evict the brokers under test;
- CoreDNS serves only cluster.local and the reverse zones: names outside the cluster get no
  answer instead of being forwarded off the machine.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import yaml

from . import (
    API_PORT,
    BRIDGE,
    CLUSTER_DOMAIN,
    ETCD_CLIENT_PORT,
    ETCD_PEER_PORT,
    GATEWAY,
    KUBERNETES_SERVICE_IP,
    NODE_NAME,
    POD_CIDR,
    PROVISIONER_NAME,
    SERVICE_CIDR,
    Paths,
)
from . import pki as pkilib
from . import processes as proc

API_URL = f"https://{GATEWAY}:{API_PORT}"
CNI_BIN = Path("/usr/lib/cni")
RUNC = Path("/usr/sbin/runc")


def _tls(p: Paths) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(p.pki / "ca.crt"))
    ctx.load_cert_chain(str(p.pki / "admin.crt"), str(p.pki / "admin.key"))
    return ctx


def make_pki(p: Paths) -> None:
    ca = pkilib.Authority(p.pki)
    api_names = (
        "127.0.0.1",
        GATEWAY,
        KUBERNETES_SERVICE_IP,
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        f"kubernetes.default.svc.{CLUSTER_DOMAIN}",
    )
    idents = [
        pkilib.Identity("apiserver", "kube-apiserver", server_names=api_names, client=False),
        pkilib.Identity("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)),
        pkilib.Identity("admin", "kubernetes-admin", ("system:masters",)),
        pkilib.Identity("controller-manager", "system:kube-controller-manager"),
        pkilib.Identity("scheduler", "system:kube-scheduler"),
        pkilib.Identity("kube-proxy", "system:kube-proxy"),
        pkilib.Identity("kubelet-client", f"system:node:{NODE_NAME}", ("system:nodes",)),
        pkilib.Identity("kubelet-server", NODE_NAME, server_names=(GATEWAY, "127.0.0.1", "localhost"), client=False),
    ]
    for ident in idents:
        ca.issue(ident)
    pkilib.service_account_keys(p.pki)
    kubeconfigs = {
        "admin": "kubernetes-admin",
        "controller-manager": "system:kube-controller-manager",
        "scheduler": "system:kube-scheduler",
        "kube-proxy": "system:kube-proxy",
        "kubelet-client": f"system:node:{NODE_NAME}",
    }
    for file, user in kubeconfigs.items():
        pkilib.write_kubeconfig(
            p.state / f"{file}.kubeconfig",
            API_URL,
            ca.cert_path,
            p.pki / f"{file}.crt",
            p.pki / f"{file}.key",
            user,
        )


def start_etcd(p: Paths, bin_dir: Path) -> None:
    url = f"http://127.0.0.1:{ETCD_CLIENT_PORT}"
    proc.start(
        p,
        "etcd",
        [
            str(bin_dir / "etcd"),
            "--name=testbed",
            f"--data-dir={p.state / 'etcd'}",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
            f"--initial-cluster=testbed=http://127.0.0.1:{ETCD_PEER_PORT}",
            "--listen-metrics-urls=",
            "--unsafe-no-fsync",  # a throwaway test store: durability is not under test here
            "--log-level=warn",
        ],
    )
    proc.wait_until("health", proc.http_ok(f"{url}/health"), 30, p, "etcd")


def start_apiserver(p: Paths, bin_dir: Path) -> None:
    k = p.pki
    proc.start(
        p,
        "kube-apiserver",
        [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{ETCD_CLIENT_PORT}",
            f"--bind-address={GATEWAY}",
            f"--advertise-address={GATEWAY}",
            f"--secure-port={API_PORT}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--client-ca-file={k / 'ca.crt'}",
            f"--tls-cert-file={k / 'apiserver.crt'}",
            f"--tls-private-key-file={k / 'apiserver.key'}",
            f"--kubelet-client-certificate={k / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={k / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={k / 'ca.crt'}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--service-account-issuer=https://kubernetes.default.svc.{CLUSTER_DOMAIN}",
            f"--service-account-key-file={k / 'sa.pub'}",
            f"--service-account-signing-key-file={k / 'sa.key'}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
        ],
    )
    proc.wait_until("/readyz", proc.http_ok(f"{API_URL}/readyz", _tls(p)), 60, p, "kube-apiserver")


def start_controller_manager(p: Paths, bin_dir: Path) -> None:
    k, kc = p.pki, p.state / "controller-manager.kubeconfig"
    proc.start(
        p,
        "kube-controller-manager",
        [
            str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--cluster-signing-cert-file={k / 'ca.crt'}",
            f"--cluster-signing-key-file={k / 'ca.key'}",
            f"--root-ca-file={k / 'ca.crt'}",
            f"--service-account-private-key-file={k / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            "--controllers=*,bootstrapsigner,tokencleaner",
            "--v=1",
        ],
    )


def start_scheduler(p: Paths, bin_dir: Path) -> None:
    kc = p.state / "scheduler.kubeconfig"
    proc.start(
        p,
        "kube-scheduler",
        [
            str(bin_dir / "kube-scheduler"),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--v=1",
        ],
    )


def containerd_config(p: Paths) -> Path:
    """containerd 1.6 (Debian) config: own root/state/socket, CNI from Debian, runc, cgroupfs."""
    cni_conf = p.state / "cni" / "net.d"
    cni_conf.mkdir(parents=True, exist_ok=True)
    (cni_conf / "10-kopfka.conflist").write_text(
        json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "kopfka-testbed",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": BRIDGE,
                        "isGateway": True,
                        "ipMasq": False,  # nothing leaves the machine, so nothing to masquerade
                        "hairpinMode": True,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{"subnet": POD_CIDR, "gateway": GATEWAY}]],
                            # No default route: pods reach the pod subnet (on the bridge) and
                            # Services (through the node), and have no route to anything else.
                            "routes": [{"dst": SERVICE_CIDR, "gw": GATEWAY}],
                            "dataDir": str(p.state / "cni" / "ipam"),
                        },
                    },
                    {"type": "portmap", "capabilities": {"portMappings": True}},
                    {"type": "loopback"},
                ],
            },
            indent=1,
        )
    )
    config = p.state / "containerd.toml"
    config.write_text(
        f"""version = 2
root = "{p.containerd_root}"
state = "{p.state / "containerd-state"}"
[grpc]
  address = "{p.containerd_socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:testbed"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni_conf}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        SystemdCgroup = false
"""
    )
    return config


def start_containerd(p: Paths) -> None:
    config = containerd_config(p)
    proc.start(p, "containerd", ["containerd", "--config", str(config)])
    proc.wait_until("socket", p.containerd_socket.exists, 30, p, "containerd")


def kubelet_config(p: Paths) -> Path:
    k = p.pki
    resolv = p.state / "resolv.conf"
    resolv.write_text("# pods with dnsPolicy Default get no upstream resolver: nothing leaves\n")
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": GATEWAY,  # the node's IP (a node IP may not be loopback): the API server's way in
        "healthzBindAddress": "127.0.0.1",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(k / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(k / "kubelet-server.crt"),
        "tlsPrivateKeyFile": str(k / "kubelet-server.key"),
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "clusterDNS": [GATEWAY],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv),
        "makeIPTablesUtilChains": False,
        "containerRuntimeEndpoint": f"unix://{p.containerd_socket}",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "serializeImagePulls": False,
        "maxPods": 110,
        "registerNode": True,
        "localStorageCapacityIsolation": True,
        "shutdownGracePeriod": "0s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "nodeStatusUpdateFrequency": "5s",
    }
    path = p.state / "kubelet.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def start_kubelet(p: Paths, bin_dir: Path) -> None:
    config = kubelet_config(p)
    proc.start(
        p,
        "kubelet",
        [
            str(bin_dir / "kubelet"),
            f"--config={config}",
            f"--kubeconfig={p.state / 'kubelet-client.kubeconfig'}",
            f"--root-dir={p.state / 'kubelet'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={GATEWAY}",
            "--v=1",
        ],
    )


def start_kube_proxy(p: Paths, bin_dir: Path) -> None:
    proc.start(
        p,
        "kube-proxy",
        [
            str(bin_dir / "kube-proxy"),
            f"--kubeconfig={p.state / 'kube-proxy.kubeconfig'}",
            "--proxy-mode=nftables",
            f"--cluster-cidr={POD_CIDR}",
            f"--hostname-override={NODE_NAME}",
            "--bind-address=127.0.0.1",
            "--healthz-bind-address=127.0.0.1:10256",
            "--metrics-bind-address=127.0.0.1:10249",
            f"--nodeport-addresses={GATEWAY}/32",
            "--v=1",
        ],
    )


def start_coredns(p: Paths, bin_dir: Path) -> None:
    corefile = p.state / "Corefile"
    corefile.write_text(
        f""".:53 {{
    bind {GATEWAY}
    errors
    health 127.0.0.1:18180
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {p.admin_kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
}}
"""
    )
    proc.start(p, "coredns", [str(bin_dir / "coredns"), "-conf", str(corefile)])
    proc.wait_until("health", proc.http_ok("http://127.0.0.1:18180/health"), 30, p, "coredns")


def start_provisioner(p: Paths, bin_dir: Path) -> None:
    p.volumes.mkdir(parents=True, exist_ok=True)
    proc.start(
        p,
        "provisioner",
        [
            str(bin_dir / "provisioner"),
            f"--kubeconfig={p.admin_kubeconfig}",
            f"--name={PROVISIONER_NAME}",
            f"--base-dir={p.volumes}",
            f"--node={NODE_NAME}",
        ],
    )
