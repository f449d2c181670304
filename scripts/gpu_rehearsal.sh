#!/usr/bin/env bash
# Before a lent GPU's minutes are spent: the GPU session's dry run under the GPU machine's own
# python packages, here on the CPU.
#
#   bash scripts/gpu_rehearsal.sh        (make gpu-rehearsal)
#
# The device's python (KINDS.md of the device tool) has torch 2.11 with CUDA, Lightning 2.6.6,
# torchmetrics, sacrebleu, numpy, PyYAML, tqdm, matplotlib and pytest, and no mlflow, dvc,
# gensim or sacremoses; the project's .venv has torch 2.13 and all four. So a step that imports
# one of them, or an API torch 2.11 lacks, passes here and fails there. This builds GPU_VENV
# (default .venv-gpu, git-ignored; torch GPU_TORCH, default 2.11.0, from PyPI: about 5 GB with
# its CUDA libraries, once) with that set and runs scripts/gpu_session.sh --cpu
# --with-paper-curve with it; results in OUT (default out/rehearsal). Run it after changing
# anything the GPU session runs; a first run found the CUDA tests' collection failing on a
# sacremoses import, which would have cost the GPU session all its CUDA tests.
set -eu
cd "$(dirname "$0")/.."
VENV=${GPU_VENV:-.venv-gpu}
TORCH=${GPU_TORCH:-2.11.0}
OUT=${OUT:-out/rehearsal}
if [[ ! -x $VENV/bin/python ]]; then
  echo "gpu_rehearsal: building $VENV (torch $TORCH and what the GPU machine has)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==$TORCH" pytorch-lightning==2.6.6 torchmetrics==1.9.0 \
    sacrebleu==2.6.0 numpy pyyaml tqdm matplotlib pytest pytest-timeout pytest-xdist
fi
for package in mlflow dvc gensim sacremoses; do
  if "$VENV/bin/python" -c "import $package" 2>/dev/null; then
    echo "gpu_rehearsal: $VENV has $package, which the GPU machine lacks" >&2
    exit 2
  fi
done
rm -rf "$OUT"
PYTHON=$VENV/bin/python OUT=$OUT exec bash scripts/gpu_session.sh --cpu --with-paper-curve
