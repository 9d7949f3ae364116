#!/usr/bin/env bash
# The Kubernetes test bed (e2e/testbed): build | images | up | down | status | env. Needs root.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec env PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m testbed "$@"
