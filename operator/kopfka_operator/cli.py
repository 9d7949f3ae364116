"""`kopfka operator`: run the KafkaCluster operator (kopf) in this process.

Scoping is explicit: `--namespace NS` (repeatable) for a namespaced install, or
`--all-namespaces` for a cluster-wide one; the Helm chart passes one of them with RBAC to match.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from .handlers import OperatorConfig, register


def add_arguments(parser: argparse.ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        dest="namespaces",
        action="append",
        metavar="NS",
        help="watch this namespace (repeatable; glob patterns as kopf accepts them)",
    )
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    parser.add_argument(
        "--default-image",
        default=os.environ.get("KOPFKA_DEFAULT_IMAGE"),
        help="image for KafkaClusters without spec.image (env KOPFKA_DEFAULT_IMAGE)",
    )
    parser.add_argument(
        "--liveness",
        metavar="URL",
        default=os.environ.get("KOPFKA_OPERATOR_LIVENESS"),
        help="serve kopf's health endpoint, e.g. http://0.0.0.0:8081/healthz",
    )
    parser.add_argument(
        "--resync-seconds",
        type=float,
        default=300.0,
        help="re-render every cluster this often to heal hand-edited children (default 300)",
    )
    parser.add_argument("--verbose", action="store_true", help="log each handler step")
    parser.add_argument("--debug", action="store_true", help="log API traffic too")


def run(args: argparse.Namespace) -> int:
    import kopf

    if not args.namespaces and not args.all_namespaces:
        print("kopfka operator: pass --namespace NS (repeatable) or --all-namespaces")
        return 2
    kopf.configure(verbose=args.verbose, debug=args.debug)
    registry = kopf.OperatorRegistry()
    config = OperatorConfig(default_image=args.default_image, resync_seconds=args.resync_seconds)
    register(registry, config)
    # One replica (the chart uses strategy Recreate): no kopf peering CRDs needed.
    asyncio.run(
        kopf.operator(
            registry=registry,
            standalone=True,
            clusterwide=bool(args.all_namespaces),
            namespaces=args.namespaces or (),
            liveness_endpoint=args.liveness,
        )
    )
    return 0
