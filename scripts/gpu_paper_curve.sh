#!/usr/bin/env bash
# The paper-width curve end to end on one GPU: RNNsearch-50 and RNNencdec-50 at the paper's width
# (E620, H1000, maxout 500, 30k vocabularies; presets/gpu_curve.yaml) trained on a 320k-pair
# Hansard sample, the 2,100 length-stratified test sentences decoded on the GPU (greedy, beam
# 12), then scored beside the default CPU run.
#
#   make paper-curve                        # = bash scripts/gpu_paper_curve.sh
#   bash scripts/gpu_paper_curve.sh --cpu   # dry run on the CPU: a tiny pack (2,000 pairs, 5 test
#                                           # sentences a bucket, in $TINY_WORK, default
#                                           # data/paper_curve_tiny), widths 16, seconds of training
#   bash scripts/gpu_paper_curve.sh --run-only   # only the GPU part, on a machine given the pack
#
# Three parts:
#   1. data: the real prepare and tokenize stages over the sample, packed into one file,
#      data/paper_curve/pack.tar.xz (about 13 MiB; skipped when it is there). About 2 minutes
#      on a 2-core CPU; needs the whole stack (make setup) and the Hansard corpus.
#   2. the run on the GPU (python -m rnnsearch.experiments.paper_curve run): training stops at a
#      step boundary when its time is spent (RNNsearch 270 s, RNNencdec 150 s; 540 s in all with
#      decoding: --search-seconds, --encdec-seconds, --total-seconds), so the run takes about
#      9 minutes; how far the models get in that time on a GPU is not measured yet. Hypotheses,
#      run.json and run.log in $OUT (default data/paper_curve/run); run.json is rewritten after
#      every cell and every decoding, so a run cut short still leaves what it had.
#   3. the report (paper_curve report): reports/paper_curve/ (tables and Figure 2).
# Arguments after the options go to `paper_curve run` (e.g. --batch-size 80 --search-seconds 900
# --total-seconds 1500). `timeout` (the run's --total-seconds + 35 s, SIGKILL 5 s later; LIMIT
# sets it) is only the last resort against a hang.
#
# Shipping the data to a GPU box as one archive: `make paper-curve-data` here, copy the
# repository and data/paper_curve/pack.tar.xz there, `bash scripts/gpu_paper_curve.sh
# --run-only` there (it needs only torch, Lightning, numpy, PyYAML and tqdm), copy $OUT back and
# `make paper-curve-report RESULTS=<that folder>` here.
set -u
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  [[ -x .venv/bin/python ]] && PYTHON=.venv/bin/python
fi
WORK=data/paper_curve
ARGS=(--device cuda) TOTAL=540 RUN_ONLY=0 TINY=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu) TINY=${TINY_WORK:-data/paper_curve_tiny} WORK=$TINY
           ARGS=(--device cpu --tiny --threads 1 --search-seconds 4 --encdec-seconds 3
                 --total-seconds 100 --reserve-seconds 10 --progress-every 2)
           TOTAL=100 ;;
    --run-only) RUN_ONLY=1 ;;
    *) break ;;
  esac
  shift
done
PACK=$WORK/pack.tar.xz
OUT=${OUT:-$WORK/run}
for ((i = 1; i < $#; i++)); do                       # the last --total-seconds given wins
  [[ ${!i} == --total-seconds ]] && { j=$((i + 1)); TOTAL=${!j%.*}; }
done
LIMIT=${LIMIT:-$((TOTAL + 35))}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
START=$SECONDS

if ((!RUN_ONLY)) && [[ ! -f $PACK ]]; then
  size=()
  [[ -n $TINY ]] && size=(--pairs 2000 --test-per-bucket 5)
  echo "gpu_paper_curve: building $PACK"
  "$PYTHON" -m rnnsearch.experiments.paper_curve pack --work "$WORK" "${size[@]}" || exit $?
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
echo "gpu_paper_curve: run exit $STATUS after $((SECONDS - START)) s; in $OUT:" $(ls "$OUT")
if ((!RUN_ONLY && STATUS == 0)); then
  reports=()
  [[ -n $TINY ]] && reports=(--reports "$TINY/reports")
  "$PYTHON" -m rnnsearch.experiments.paper_curve report --results "$OUT" --work "$WORK" \
    "${reports[@]}" || STATUS=$?
  echo "gpu_paper_curve: done in $((SECONDS - START)) s, exit $STATUS"
fi
exit "$STATUS"
