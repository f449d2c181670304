#!/usr/bin/env bash
# The checks a session with a lent GPU runs once, prepared so that they fit one device command
# (10 minutes) and need nothing from the internet:
#
#   bash scripts/gpu_session.sh                       # the GPU checks; results under $OUT (default: out/)
#   bash scripts/gpu_session.sh --with-paper-curve    # the checks AND the paper-width curve, one command
#   bash scripts/gpu_session.sh --cpu [...]           # the same steps on this CPU at tiny sizes (a dry run)
#
# Steps (each under its own time limit, all within DEADLINE seconds, default 560; a failed step
# is reported and the next one runs; the exit status is that of the first failure):
#   1. environment: nvidia-smi, python, torch, CUDA, Lightning        -> session.log
#   2. the CUDA tests: pytest -m cuda on the test files that hold them (decoding on the device,
#      the bench, CUDA graphs of the decoder loop against the eager loop) -> pytest-cuda.xml
#      (a test's record_property says how many hypotheses differ between the devices)
#   3. the GPU benchmark: python -m rnnsearch.bench --device cuda      -> bench_gpu.{json,md}
#      (eager and train.trainer.cuda_graphs, and torch.profiler's account of a step)
#   4. a tiny trained model (python -m rnnsearch.experiments.tiny), its test sentences decoded
#      on the CPU and on the GPU, hypotheses compared                  -> compare_tiny.json
#   5. only if the real model and test set were carried along (the device tool's carry:
#      data/models/search-50/model.pt, data/tokenized/test.src, data/tokenized/vocab.src.txt,
#      data/tokenized/vocab.tgt.txt; CELL picks another cell; COMPARE_MODEL and COMPARE_DATA
#      other paths, as the dry-run test's tiny model): the same comparison on the first
#      COMPARE_SENTENCES (default 2100) test sentences, as many as its time allows (the CPU's
#      side is the slow one; the report counts them)                 -> compare_test.json
#
# --with-paper-curve (issue 12's GPU work in ONE device command, for a session with one draw of
# 15 device minutes; make gpu-preflight prints the call and what it carries): DEADLINE 585 and
# the steps environment; the paper-width curve (scripts/gpu_paper_curve.sh, PAPER_SECONDS in
# all, default 300: RNNsearch-50 and RNNencdec-50 trained about 138 and 77 s; PAPER_ARGS: the
# options of paper_curve run, on the GPU by default --cuda-graphs (RNNsearch's loop replayed as
# CUDA graphs, the first capture checked against the eager loop, any failure falling back to
# it; PAPER_ARGS= for the eager loop throughout)) -> paper_curve.tar.gz (make
# paper-curve-report RESULTS=<it>); the bench's quick plan (about half the full one) ->
# bench_gpu.{json,md}; step 5; the CUDA tests with what time is left.
#
# At most 8 files land in $OUT, none in a subfolder: what the device tool brings back. The GPU
# machine's python3 has torch (CUDA), Lightning, numpy, PyYAML, tqdm, sacrebleu and pytest, not
# mlflow, dvc, gensim or sacremoses: nothing here needs them. Wheels found in .whl/ (carried
# along, see the device README) are installed first, without the network: with sacremoses and
# mlflow there, the translate stage's own CUDA test runs too instead of skipping.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-out}
CELL=${CELL:-search-50}
COMPARE_MODEL=${COMPARE_MODEL:-data/models/$CELL/model.pt}
COMPARE_DATA=${COMPARE_DATA:-data/tokenized}          # test.src, vocab.src.txt, vocab.tgt.txt
DEADLINE_SET=${DEADLINE:-} DEADLINE=${DEADLINE:-560}
COMPARE_SENTENCES=${COMPARE_SENTENCES:-2100}
DEVICE=cuda TINY_ARGS=() TINY_STEPS=300 TINY_SENTENCES=300 WITH_PAPER=0 SCALE=1
for arg in "$@"; do
  case "$arg" in
    --cpu) DEVICE=cpu TINY_ARGS=(--tiny --threads 1) TINY_STEPS=10 TINY_SENTENCES=20
           SCALE=${STEP_SCALE:-10} ;;
    --with-paper-curve) WITH_PAPER=1 DEADLINE=${DEADLINE_SET:-585} ;;
    *) echo "usage: bash scripts/gpu_session.sh [--cpu] [--with-paper-curve]" >&2; exit 2 ;;
  esac
done
# The dry run (--cpu) checks that every step works, not how long it takes: a busy CPU runs
# the tiny steps slower than the GPU runs the real ones, so each step's limit, and the
# deadline when none is given, are STEP_SCALE (default 10) times the GPU's.
[[ -z $DEADLINE_SET ]] && DEADLINE=$((DEADLINE * SCALE))
PAPER_SECONDS=${PAPER_SECONDS:-300}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/session.log
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
START=$SECONDS STATUS=0

if compgen -G ".whl/*.whl" >/dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$WORK/site" .whl/*.whl && export PYTHONPATH="$PYTHONPATH:$WORK/site"
fi

# step NAME LIMIT COMMAND...: run COMMAND under min(LIMIT, time left), its output in the log
step() {
  local name=$1 limit=$(($2 * SCALE)) left rc
  shift 2
  left=$((DEADLINE - (SECONDS - START)))
  ((limit > left)) && limit=$left
  if ((limit < 10)); then
    echo "== $name: skipped, the session's $DEADLINE s are spent" | tee -a "$LOG"
    ((STATUS == 0)) && STATUS=124
    return
  fi
  echo "== $name (at most $limit s): $*" | tee -a "$LOG"
  timeout "$limit" "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc after $((SECONDS - START)) s in all" | tee -a "$LOG"
  ((rc != 0 && STATUS == 0)) && STATUS=$rc
  return 0
}

VERSIONS='import platform, torch, pytorch_lightning as pl
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}),",
      f"Lightning {pl.__version__}, GPU: {gpu}")'

: >"$LOG"
echo "gpu_session: device $DEVICE, results in $OUT" | tee -a "$LOG"
if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1 | tee -a "$LOG"; fi

cuda_tests() {
  step cuda-tests "$1" "$PYTHON" -m pytest -v -p no:cacheprovider -rA -m cuda \
    --junitxml="$OUT/pytest-cuda.xml" tests/test_cuda_graphs.py tests/test_decoding_device.py \
    tests/test_bench_device.py     # in this order: a cut run (-v) still logs the first ones
}

# compare_test LIMIT: within LIMIT s (or what is left), its own --seconds 20 s less (loading
# the model twice, warm-ups): the leading test sentences that fit, counted in the report
compare_test() {
  local limit=$1 left=$((DEADLINE - (SECONDS - START)))
  ((limit > left)) && limit=$left
  if [[ -f $COMPARE_MODEL && -f $COMPARE_DATA/test.src ]]; then
    step compare-test "$limit" "$PYTHON" -m rnnsearch.decoding.compare \
      --model "$COMPARE_MODEL" --vocab-dir "$COMPARE_DATA" \
      --sources "$COMPARE_DATA/test.src" --max-sentences "$COMPARE_SENTENCES" \
      --seconds $((limit > 30 ? limit - 20 : 10)) --devices cpu "$DEVICE" \
      --out "$OUT/compare_test.json"
  else
    echo "== compare-test: skipped (no $COMPARE_MODEL or $COMPARE_DATA/test.src)" \
      | tee -a "$LOG"
  fi
}

# The paper-width curve within PAPER_SECONDS: its own budget 15 s less, two cells' decoding
# reserved (35 s each), the training time split 9:5 between RNNsearch and RNNencdec as in
# gpu_paper_curve.sh's 270 / 150 s. Its files, whatever it finished, -> paper_curve.tar.gz.
paper_curve() {
  local total=$((PAPER_SECONDS - 15)) budget=()
  local search=$(((total - 70) * 9 / 14))
  budget=(--total-seconds "$total" --reserve-seconds 35 --search-seconds "$search"
          --encdec-seconds $((total - 70 - search)))
  [[ $DEVICE == cpu ]] && budget=(--cpu)
  local default=()
  [[ $DEVICE == cuda ]] && default=(--cuda-graphs)     # graphs need a GPU
  read -ra extra <<<"${PAPER_ARGS-${default[*]}}"      # PAPER_ARGS unset: the default
  budget+=("${extra[@]}")
  step paper-curve "$PAPER_SECONDS" env OUT="$WORK/paper" PYTHON="$PYTHON" \
    LIMIT=$((PAPER_SECONDS - 8)) bash scripts/gpu_paper_curve.sh "${budget[@]}"
  if [[ -d $WORK/paper ]]; then tar -czf "$OUT/paper_curve.tar.gz" -C "$WORK/paper" .; fi
}

step environment 60 "$PYTHON" -c "$VERSIONS"
if ((WITH_PAPER)); then
  paper_curve
  after=40                                         # at least 30 s for the CUDA tests
  [[ -f $COMPARE_MODEL ]] && after=100
  step bench $((DEADLINE - (SECONDS - START) - after)) "$PYTHON" -m rnnsearch.bench \
    --device "$DEVICE" --quick "${TINY_ARGS[@]}" --out "$OUT"
  compare_test 60
  cuda_tests 150
else
  cuda_tests 150
  step bench 400 "$PYTHON" -m rnnsearch.bench --device "$DEVICE" "${TINY_ARGS[@]}" --out "$OUT"
  step tiny-model 90 "$PYTHON" -m rnnsearch.experiments.tiny --out "$WORK/tiny" \
    --steps "$TINY_STEPS" --sentences "$TINY_SENTENCES"
  step compare-tiny 60 "$PYTHON" -m rnnsearch.decoding.compare --model "$WORK/tiny/model.pt" \
    --vocab-dir "$WORK/tiny" --sources "$WORK/tiny/test.src" --devices cpu "$DEVICE" \
    --out "$OUT/compare_tiny.json"
  compare_test 120
fi
echo "gpu_session: done in $((SECONDS - START)) s, exit $STATUS; files:" $(ls "$OUT") | tee -a "$LOG"
exit "$STATUS"
