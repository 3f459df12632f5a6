#!/usr/bin/env bash
# The GPU check as one prepared script, for a machine with CUDA and torch
# (and transformers) installed but no internet: the nbval/Jupyter wheels it
# lacks travel in .whl/ (`make gpu-wheels` fills it here), plain package
# folders (the plays notebook 09 reads) in .whl/site/. Results go to $OUT
# (default: artifacts/gpu). Its three steps' time limits add up to under one
# device call's ten minutes. Usage, from the repository root:
#     bash autograder/authoring/gpu_offline_check.sh
set -uo pipefail
OUT=${OUT:-artifacts/gpu}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
fi
export PYTHONPATH=/tmp/site:$PWD/.whl/site:$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MPLBACKEND=Agg
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, transformers, nbval, ipykernel, pytest; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'nbval', nbval.__version__, 'pytest', pytest.__version__)" | tee -a "$OUT/gpu.txt"
date -u | tee -a "$OUT/gpu.txt"
timeout 120 python3 -m pytest -q -rs -p no:cacheprovider tests/tinylm/test_cuda.py 2>&1 | tee "$OUT/test_cuda.log"
timeout 240 python3 -m autograder.authoring.nbval_gpu --jobs "${JOBS:-10}" 2>&1 | tee "$OUT/nbval_gpu.log"
# The checks on the solutions with a GPU present: every contract gains its cuda regime.
timeout 150 python3 -m pytest -q -rs -p no:cacheprovider -n 8 -m "not slow" tests/checks 2>&1 | tee "$OUT/checks_cuda.log"
