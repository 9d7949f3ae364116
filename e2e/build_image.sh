#!/usr/bin/env bash
# Build the kopfka image with buildah on a machine without Docker Hub, then smoke-test it with
# podman: `kopfka storage format` and `kopfka serve` (HTTP /healthz) inside the image.
#
#   e2e/build_image.sh [IMAGE]       (root; needs buildah, podman, runc, debootstrap)
#
# The base image is a Debian rootfs made by debootstrap (cached in $KOPFKA_IMAGE_CACHE) and
# committed as a local image; the Dockerfile's ARG BASE then points at it. On a machine with a
# registry, `docker build .` (python:3.12-slim base) is all you need instead.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
IMAGE="${1:-localhost/kopfka:dev}"
BASE_IMAGE="${KOPFKA_BASE_IMAGE:-localhost/kopfka-base:bookworm}"
CACHE="${KOPFKA_IMAGE_CACHE:-/var/cache/kopfka-image}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SMOKE="${KOPFKA_SMOKE:-1}"

log() { printf '== %s\n' "$*" >&2; }

if ! buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
  rootfs="$CACHE/rootfs"
  if [ ! -x "$rootfs/usr/bin/python3" ]; then
    log "debootstrap bookworm into $rootfs (a few minutes)"
    rm -rf "$rootfs"
    mkdir -p "$CACHE"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      bookworm "$rootfs" "$MIRROR"
  fi
  log "committing $rootfs as $BASE_IMAGE"
  ctr="$(buildah from scratch)"
  mnt="$(buildah mount "$ctr")"
  cp -a "$rootfs"/. "$mnt"/
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /usr/bin/python3 "$ctr"
  buildah commit --quiet "$ctr" "$BASE_IMAGE" >/dev/null
  buildah rm "$ctr" >/dev/null
fi

# pip inside the build trusts this host's CA bundle (needed behind a TLS-intercepting proxy).
CA="${KOPFKA_BUILD_CA:-/etc/ssl/certs/ca-certificates.crt}"
ca_args=()
if [ -f "$CA" ]; then
  ca_args=(--volume "$CA:/run/kopfka-build-ca.crt:ro" --build-arg PIP_CERT=/run/kopfka-build-ca.crt)
fi

log "building $IMAGE from $ROOT/Dockerfile on $BASE_IMAGE"
buildah bud --isolation chroot --network host --layers=false "${ca_args[@]}" \
  --build-arg "BASE=$BASE_IMAGE" -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT"

[ "$SMOKE" = 1 ] || exit 0

run() {
  podman run --rm --runtime /usr/sbin/runc --network host \
    --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "$@"
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 0777 "$work"
port="${KOPFKA_SMOKE_HTTP_PORT:-18080}"
cat > "$work/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
listeners=CLIENT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093
advertised.listeners=CLIENT://127.0.0.1:19092
listener.security.protocol.map=CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=CLIENT
controller.quorum.voters=1@127.0.0.1:19093
log.dirs=/work/data-0,/work/data-1
metadata.log.dir=/work/data-0
kopfka.http.listener=127.0.0.1:$port
PROPS

log "kopfka storage random-uuid"
cluster_id="$(run "$IMAGE" storage random-uuid | tr -d '\r\n')"
log "cluster id: $cluster_id"
log "kopfka storage format (twice: the second must be a no-op with --ignore-formatted)"
for _ in 1 2; do
  run -v "$work:/work" "$IMAGE" storage format --cluster-id "$cluster_id" \
    --config /work/server.properties --ignore-formatted
done
log "kopfka serve, waiting for /healthz on 127.0.0.1:$port"
podman rm -f kopfka-smoke >/dev/null 2>&1 || true
podman run -d --name kopfka-smoke --runtime /usr/sbin/runc --network host \
  --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 -v "$work:/work" \
  "$IMAGE" serve --config /work/server.properties >/dev/null
ok=0
for _ in $(seq 1 60); do
  if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/healthz', timeout=2)" 2>/dev/null; then
    ok=1; break
  fi
  sleep 1
done
podman logs kopfka-smoke 2>&1 | tail -20 >&2 || true
podman stop --time 60 kopfka-smoke >/dev/null || true
podman rm -f kopfka-smoke >/dev/null 2>&1 || true
[ "$ok" = 1 ] || { log "kopfka serve did not answer /healthz"; exit 1; }
log "image $IMAGE: storage format and serve OK"
