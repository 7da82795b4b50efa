#!/usr/bin/env bash
# The README's main job: installs what kad needs, builds it, starts the kad
# daemon (PoCL on the CPU, the embedded default) and runs a demo client
# against it that prints the device, the launch choice and a checked result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
cmake -S . -B build -G Ninja
cmake --build build -j2 --target kad kad-demo
bash deploy/run-kad-demo.sh build/server/kad build/client/kad-demo
