"""`e2e/testbed.sh COMMAND`: build | images | up | down | status | env."""

from __future__ import annotations

import argparse
import sys
import time

from . import build as buildlib
from . import cluster, components, paths
from . import images as imageslib
from . import processes as proc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="e2e/testbed.sh", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the binaries (cached by the pinned versions)")
    sub.add_parser("images", help="build the pod images and import them (needs containerd up)")
    upp = sub.add_parser("up", help="start a fresh cluster (builds what is missing)")
    upp.add_argument("--no-build", action="store_true", help="fail instead of building")
    sub.add_parser("down", help="stop everything and remove the cluster's state")
    sub.add_parser("status", help="which daemons run")
    sub.add_parser("env", help="print shell exports (KUBECONFIG, PATH, images)")
    args = parser.parse_args(argv)
    p = paths()
    if args.command == "build":
        started = time.monotonic()
        print(buildlib.build(p))
        print(f"build: {time.monotonic() - started:.0f} s", file=sys.stderr)
    elif args.command == "images":
        components.start_containerd(p) if proc.pid_of(p, "containerd") is None else None
        print(imageslib.ensure(p, buildlib.build(p), imageslib.Images.current()) or "all images present")
    elif args.command == "up":
        try:
            cluster.up(p, build=not args.no_build)
        except proc.StartError as exc:
            print(f"test bed did not come up: {exc}", file=sys.stderr)
            return 1
    elif args.command == "down":
        cluster.down(p)
    elif args.command == "status":
        total = 0.0
        for name, pid in cluster.status(p).items():
            rss = cluster.rss_mib(pid) if pid else 0.0
            total += rss
            print(f"{name:24} {f'running, pid {pid}, {rss:.0f} MiB' if pid else 'stopped'}")
        print(f"{'control plane + node':24} {total:.0f} MiB resident; pods {cluster.pods_memory_mib():.0f} MiB")
    elif args.command == "env":
        print(f"export KUBECONFIG={p.admin_kubeconfig}")
        print(f"export PATH={buildlib.bin_dir(p)}:$PATH")
        images = imageslib.Images.current()
        print(f"export KOPFKA_TESTBED_IMAGE={images.kopfka}")
        print(f"export KOPFKA_TESTBED_CLIENT_IMAGE={images.client}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
