#!/usr/bin/env bash
# CUDA checks in one go: the CUDA-marked tests, then batched Hartmann-6 EUBO replications on the
# GPU (16, 64, 256 replications of 50 queries) next to the sequential CPU loop (2 replications
# timed and scaled, see benchmarks/pbo_batched.py). Run from the repository root on a machine
# with a GPU:  bash benchmarks/cuda.sh   (tables land in benchmarks/out/cuda-*.md)
set -euo pipefail
export PYTHONPATH="${PYTHONPATH:-}:."
export OMP_WAIT_POLICY=PASSIVE
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name())"
python -m pytest -q -m cuda tests/
for R in 16 64 256; do
  for DTYPE in float64 float32; do
    python benchmarks/pbo_batched.py --problems hartmann6 --strategies eubo --replications "$R" \
      --queries 50 --device cuda --dtype "$DTYPE" --sequential-replications 2 \
      --out "benchmarks/out/cuda-$R-$DTYPE"
  done
done
cat benchmarks/out/cuda-*-batched.md
