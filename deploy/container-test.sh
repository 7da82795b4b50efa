#!/usr/bin/env bash
# The container image, for real (DESIGN §10), as the test suite runs it:
# builds deploy/Containerfile with podman from a Debian base that
# debootstrap makes from the mirror apt uses (no image registry; the base
# and podman's layers are kept between runs), starts it, and from the host:
# the health check turns healthy, `kactl devices` and a saxpy through the
# bind-mounted socket (shared memory across the container boundary), a
# saxpy over TCP, and `podman stop` (SIGTERM) drains and exits 0.
# Skips, saying why, without podman or without root.
#   deploy/container-test.sh KACTL_BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
kactl="$(realpath "${1:?usage: container-test.sh KACTL_BINARY}")"
if ! command -v podman >/dev/null || ! command -v debootstrap >/dev/null; then
  echo "container-test.sh: skipped: needs podman and debootstrap (deploy/install-deps.sh)" >&2
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "container-test.sh: skipped: needs root (debootstrap, and podman with runc here)" >&2
  exit 0
fi

work=$(mktemp -d /tmp/kad-container-XXXXXX)
name="kad-test-$$"
cleanup() {
  podman rm -f "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# This machine's kind needs runc (crun refuses the hybrid cgroup layout) and
# ulimits within what the host allows: set through a configuration of this
# script's own, touching no system file.
cat > "$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$work/containers.conf"

base=localhost/kad-debian-base:bookworm
if ! podman image exists "$base"; then
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  echo "container-test.sh: making the base image with debootstrap from $mirror"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; exit 1; }
  # The image's apt reads the same mirror, with the security updates.
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$mirror" "$mirror" \
    > "$work/rootfs/etc/apt/sources.list"
  tar -C "$work/rootfs" -c . | podman import - "$base" >/dev/null 2>&1
  rm -rf "$work/rootfs"
fi

echo "container-test.sh: building the image (podman's layers are kept for the next run)"
podman build --format docker --build-arg BASE="$base" -f deploy/Containerfile -t localhost/kad:test . \
  > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }

mkdir -p "$work/run"
chmod 0777 "$work/run"  # kad in the container is uid 7470
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Host networking: kad's TCP port is the host's loopback (plaintext TCP is
# for loopback only), the socket directory is bound from the host.
podman run -d --name "$name" --network host -v "$work/run:/run/kad" localhost/kad:test \
  --listen unix:/run/kad/kad.sock --listen "tcp://127.0.0.1:$port" > /dev/null 2>> "$work/podman.log"

status=starting
for _ in $(seq 60); do
  podman healthcheck run "$name" >/dev/null 2>&1 || true  # no systemd timers here: asked
  status=$(podman inspect --format '{{.State.Health.Status}}' "$name" 2>/dev/null || echo none)
  [ "$status" = healthy ] && break
  sleep 1
done
if [ "$status" != healthy ]; then
  echo "container-test.sh: the health check is $status, not healthy" >&2
  podman logs "$name" | tail -20 >&2
  exit 1
fi
echo "container-test.sh: the health check turned healthy"

cat > "$work/saxpy.cl" <<'CL'
kernel void saxpy(KAD_CONTEXT, global float* y, global const float* x, float a) {
  if (kad_active()) y[kad_global_linear()] += a * x[kad_global_linear()];
}
CL
saxpy() {  # y = 1 + 2 i: the sums of y over 1024 elements
  "$kactl" --connect "$1" --json run "$work/saxpy.cl" --entry saxpy --ndrange 1024 \
    --arg buf:float:1024=0*i+1 --arg cbuf:float:1024=1*i+0 --arg float:2
}
"$kactl" --connect "unix:$work/run/kad.sock" devices | tee "$work/devices"
grep -q "opencl:pocl:0" "$work/devices" || { echo "no PoCL device in the container" >&2; exit 1; }
# ?transport=shm: shared memory or an error, no quiet fallback to gRPC.
for address in "unix:$work/run/kad.sock?transport=shm" "tcp://127.0.0.1:$port"; do
  out=$(saxpy "$address")
  # sum of 1 + 2i for i < 1024 = 1024 + 1023 * 1024 = 1048576
  if ! grep -q '"sum":1048576' <<<"$out"; then
    echo "container-test.sh: saxpy through $address: $out" >&2
    exit 1
  fi
  echo "container-test.sh: saxpy through $address is correct"
done

podman stop -t 40 "$name" > /dev/null 2>> "$work/podman.log"
code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
if [ "$code" != 0 ]; then
  echo "container-test.sh: kad exited $code on SIGTERM" >&2
  podman logs "$name" | tail -20 >&2
  exit 1
fi
# The log is read whole before grep: under pipefail, `podman logs | grep -q`
# fails whenever grep's early exit kills podman with SIGPIPE.
podman logs "$name" > "$work/kad.log" 2>&1
if ! grep -q "SIGTERM: draining" "$work/kad.log" || ! grep -q "kad info: stopped" "$work/kad.log"; then
  echo "container-test.sh: kad did not log that it drained and stopped:" >&2
  tail -n 20 "$work/kad.log" >&2
  exit 1
fi
echo "container-test.sh: podman stop drained kad and it exited 0; the image passes"
