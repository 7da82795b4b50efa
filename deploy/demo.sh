#!/usr/bin/env bash
# The README's main job: installs what kad needs, builds it, and launches a
# kernel through the pipeline on PoCL (the embedded default CPU device),
# printing the device, the launch choice and the checked result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
cmake -S . -B build -G Ninja
cmake --build build -j2 --target kad-demo
./build/server/kad-demo
