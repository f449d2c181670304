#!/usr/bin/env bash
# The paper-width curve (issue 12, item 4) as ONE device command: RNNsearch-50 and RNNencdec-50
# at the paper's width (E620, H1000, maxout 500, 30k vocabularies) trained on the 320k-pair
# Hansard pack, the 2,100 length-stratified test sentences decoded on the GPU (greedy, beam 12);
# hypotheses, run.json and run.log land in $OUT (default out/).
#
# 1. Here, on the CPU (about 2 minutes; data/ is git-ignored, so the pack travels by carry):
#      make paper-curve-data        # -> data/paper_curve/pack.tar.xz (about 13 MiB)
# 2. The device tool's call (one H200; at most 600 s a command, this one ends by about 550 s):
#      run(command="bash scripts/gpu_paper_curve.sh", carry=["data/paper_curve/pack.tar.xz"],
#          timeout_s=600)
# 3. Here, with the files it returned (files_at):
#      make paper-curve-report RESULTS=<files_at>
#      (= python -m rnnsearch.experiments.paper_curve report --results <files_at>)
#
# The run budgets itself (540 s in all from its start: RNNsearch 270 s and RNNencdec 150 s of
# training, the rest for unpacking, the dev loss and decoding) and stops training at a step
# boundary; `timeout` (575 s, SIGKILL 5 s later) is only the last resort against a hang. run.json
# is rewritten after every cell and every decoding, so a cut run still returns what it had.
# Arguments after the options go to `paper_curve run` (e.g. --batch-size 80 --search-seconds 300).
#
#   bash scripts/gpu_paper_curve.sh --cpu   # dry run on this CPU: a tiny pack (2,000 pairs,
#                                           # 5 test sentences a bucket; built if missing, in
#                                           # $TINY_WORK, default data/paper_curve_tiny),
#                                           # widths 16, seconds of training, under a minute
set -u
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  [[ -x .venv/bin/python ]] && PYTHON=.venv/bin/python     # here; the GPU machine has no .venv
fi
OUT=${OUT:-out}
PACK=${PACK:-data/paper_curve/pack.tar.xz}
DEFAULT_LIMIT=575
ARGS=(--device cuda)
if [[ "${1:-}" == "--cpu" ]]; then
  shift
  TINY=${TINY_WORK:-data/paper_curve_tiny}
  PACK=$TINY/pack.tar.xz
  ARGS=(--device cpu --tiny --threads 1 --search-seconds 4 --encdec-seconds 3
        --total-seconds 100 --reserve-seconds 10 --progress-every 2)
  DEFAULT_LIMIT=120
fi
# LIMIT: the last resort's seconds (gpu_session.sh --with-paper-curve sets it below its own step
# limit: a timeout around this script would stop bash, not the run inside this timeout).
LIMIT=${LIMIT:-$DEFAULT_LIMIT}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
START=$SECONDS

if [[ -n "${TINY:-}" && ! -f $PACK ]]; then
  "$PYTHON" -m rnnsearch.experiments.paper_curve pack --work "$TINY" --pairs 2000 \
    --test-per-bucket 5 || exit $?
fi
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.used,memory.total,driver_version --format=csv
fi
timeout -k 5 "$LIMIT" "$PYTHON" -m rnnsearch.experiments.paper_curve run --pack "$PACK" \
  --out "$OUT" "${ARGS[@]}" "$@" 2>&1 | tee "$OUT/run.log"
STATUS=${PIPESTATUS[0]}
if ((STATUS == 124 || STATUS == 137)); then
  echo "gpu_paper_curve: stopped by timeout after $LIMIT s; $OUT/run.json holds what was done"
fi
echo "gpu_paper_curve: exit $STATUS after $((SECONDS - START)) s; in $OUT:" $(ls "$OUT")
exit "$STATUS"
