#!/usr/bin/env bash
# For a machine with an NVIDIA GPU and the CUDA toolkit (no kad build needed
# there): checks that ptxas accepts kad's PTX for sm_90, that the driver JIT
# loads it, and runs the conformance kernel `indices` on the GPU.
# Prepare here:  KAD_PTX_OUT=$PWD/build/ptx build/tests/kad_toolchain_tests --gtest_filter='*Ptx*'
#                cp tests/toolchain/gpu/* build/ptx/
# Run there:     bash build/ptx/ptx_check.sh   (carrying build/ptx)
# Not yet run on a GPU: no device was lent when it was written.
set -u
cd "$(dirname "$0")"
CUDA=${CUDA_HOME:-/usr/local/cuda}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$CUDA/bin/ptxas" --version | tail -1
for f in *.ptx; do
  if "$CUDA/bin/ptxas" -arch=sm_90 "$f" -o "/tmp/${f%.ptx}.cubin"; then
    echo "ptxas sm_90 ok: $f"
  else
    echo "ptxas sm_90 FAILED: $f"
  fi
done
"$CUDA/bin/nvcc" -O2 -o /tmp/ptx_load_check ptx_load_check.cpp -lcuda && /tmp/ptx_load_check *.ptx
