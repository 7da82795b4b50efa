#!/usr/bin/env bash
# Installs every build and test dependency of kad from Debian 12 packages.
# Idempotent: packages already present are left alone and apt is not touched.
#   install-deps.sh           what building and testing kad needs
#   install-deps.sh --build   what building it needs (deploy/Containerfile's build stage)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3
  libabsl-dev libssl-dev openssl
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  clang-15 llvm-15 lld-15 libclc-15 llvm-spirv-15 spirv-tools
  libze-dev libze1 libhsa-runtime-dev libhsa-runtime64-1 libmsgpack-cxx-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libtomlplusplus-dev libcli11-dev libspdlog-dev libseccomp-dev
  nlohmann-json3-dev libcpp-httplib-dev
  libtcmalloc-minimal4
)
if [ "${1:-}" != "--build" ]; then
  # The tests' tools: formatting, the systemd unit's and the Kubernetes
  # manifests' offline checks, promtool, and podman for the container test.
  packages+=(clang-format-15 git systemd prometheus python3-yaml
    podman runc debootstrap uidmap)
  # kubectl: Debian's, unless one is installed already (another package's
  # kubectl would conflict with it).
  command -v kubectl >/dev/null || packages+=(kubernetes-client)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root to install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
