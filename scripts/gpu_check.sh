#!/usr/bin/env bash
# Does the GPU path work on this machine? One command, under ten minutes on a GPU, no internet:
#
#   make gpu-check [OUT=gpu-check]          # = bash scripts/gpu_check.sh; results in $OUT
#   bash scripts/gpu_check.sh --cpu         # the same steps on the CPU at tiny sizes (a dry run)
#
# Steps (each under its own time limit, all within DEADLINE seconds, default 560; a failed step
# is reported and the next one runs; the exit status is that of the first failure):
#   1. environment: nvidia-smi, python, torch, CUDA, Lightning; stops here when torch sees no
#      CUDA GPU (a CPU build of torch, or no driver)                 -> check.log
#   2. the CUDA tests: pytest -m cuda on the test files that hold them (decoding on the GPU, the
#      bench, CUDA graphs of the decoder loop against the eager loop) -> pytest-cuda.xml
#   3. the benchmark: python -m rnnsearch.bench --device cuda  -> bench_gpu.{json,md} (cpu: bench.*)
#      (eager and train.trainer.cuda_graphs, and torch.profiler's account of a step; copy
#      them to reports/ to keep them with the project)
#   4. a tiny trained model (python -m rnnsearch.experiments.tiny), its test sentences decoded
#      on the CPU and on the GPU, hypotheses compared                 -> compare_tiny.json
#   5. when the default run's model is here (data/models/$CELL/model.pt, CELL default
#      search-50, with data/tokenized/test.src and its vocabularies: `make repro` or
#      `dvc repro train@search-50` makes them; COMPARE_MODEL and COMPARE_DATA name others):
#      the committed test set decoded on the CPU and on the GPU, the first COMPARE_SENTENCES
#      (default 2100) sentences, as many as its time allows (the CPU's side is the slow one;
#      the report counts them)                                       -> compare_test.json
# Then summary.md: each step's exit status, the CUDA tests' counts, how many hypotheses differ
# between the CPU and the GPU, and one verdict line.
#
# The check needs torch (a CUDA build), Lightning, numpy, PyYAML, tqdm, sacrebleu and pytest;
# not mlflow, dvc, gensim or sacremoses, so a GPU box with only those installed runs it too
# (PYTHON=python3 bash scripts/gpu_check.sh; the translate stage's own CUDA test then skips).
set -u
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  [[ -x .venv/bin/python ]] && PYTHON=.venv/bin/python
fi
OUT=${OUT:-gpu-check}
CELL=${CELL:-search-50}
COMPARE_MODEL=${COMPARE_MODEL:-data/models/$CELL/model.pt}
COMPARE_DATA=${COMPARE_DATA:-data/tokenized}          # test.src, vocab.src.txt, vocab.tgt.txt
DEADLINE_SET=${DEADLINE:-} DEADLINE=${DEADLINE:-560}
COMPARE_SENTENCES=${COMPARE_SENTENCES:-2100}
DEVICE=cuda TINY_ARGS=() TINY_STEPS=300 TINY_SENTENCES=300 SCALE=1
for arg in "$@"; do
  case "$arg" in
    --cpu) DEVICE=cpu TINY_ARGS=(--tiny --threads 1) TINY_STEPS=10 TINY_SENTENCES=20
           SCALE=${STEP_SCALE:-10} ;;
    *) echo "usage: bash scripts/gpu_check.sh [--cpu]" >&2; exit 2 ;;
  esac
done
# The dry run (--cpu) checks that every step works, not how long it takes: a busy CPU runs the
# tiny steps slower than a GPU runs the real ones, so each step's limit, and the deadline when
# none is given, are STEP_SCALE (default 10) times the GPU's: they only stop a hang.
[[ -z $DEADLINE_SET ]] && DEADLINE=$((DEADLINE * SCALE))
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/check.log
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
START=$SECONDS STATUS=0

# step NAME LIMIT COMMAND...: run COMMAND under min(LIMIT, time left), its output in the log
step() {
  local name=$1 limit=$(($2 * SCALE)) left rc
  shift 2
  left=$((DEADLINE - (SECONDS - START)))
  ((limit > left)) && limit=$left
  if ((limit < 10)); then
    echo "== $name: skipped, the check's $DEADLINE s are spent" | tee -a "$LOG"
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

# The versions; on a GPU, exit 1 when torch sees none (nothing after it could pass).
# (Lightning's version from its metadata: importing it takes seconds and tells nothing more.)
ENVIRONMENT='import platform, sys, torch
from importlib.metadata import version
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
lightning = version("pytorch-lightning")
print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}),",
      f"Lightning {lightning}, GPU: {gpu}")
if sys.argv[1] == "cuda" and gpu == "none":
    sys.exit(f"torch {torch.__version__} sees no CUDA GPU: "
             + ("a CPU build of torch; install a CUDA build" if torch.version.cuda is None
                else "is the NVIDIA driver installed and nvidia-smi working?"))'

: >"$LOG"
echo "gpu_check: device $DEVICE, results in $OUT" | tee -a "$LOG"
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
    step compare-test "$limit" "$PYTHON" -m rnnsearch.decoding.device_agreement \
      --model "$COMPARE_MODEL" --vocab-dir "$COMPARE_DATA" \
      --sources "$COMPARE_DATA/test.src" --max-sentences "$COMPARE_SENTENCES" \
      --seconds $((limit > 30 ? limit - 20 : 10)) --devices cpu "$DEVICE" \
      --out "$OUT/compare_test.json"
  else
    echo "== compare-test: skipped (no $COMPARE_MODEL or $COMPARE_DATA/test.src;" \
         "make repro trains it)" | tee -a "$LOG"
  fi
}

step environment 60 "$PYTHON" -c "$ENVIRONMENT" "$DEVICE"
if ((STATUS == 0)); then
  cuda_tests 150
  step bench 400 "$PYTHON" -m rnnsearch.bench --device "$DEVICE" "${TINY_ARGS[@]}" --out "$OUT"
  step tiny-model 90 "$PYTHON" -m rnnsearch.experiments.tiny --out "$WORK/tiny" \
    --steps "$TINY_STEPS" --sentences "$TINY_SENTENCES"
  step compare-tiny 60 "$PYTHON" -m rnnsearch.decoding.device_agreement --model "$WORK/tiny/model.pt" \
    --vocab-dir "$WORK/tiny" --sources "$WORK/tiny/test.src" --devices cpu "$DEVICE" \
    --out "$OUT/compare_tiny.json"
  compare_test 120
fi
echo "gpu_check: done in $((SECONDS - START)) s, exit $STATUS" | tee -a "$LOG"

# summary.md: what a reader wants first, from the files above.
"$PYTHON" - "$OUT" "$STATUS" "$DEVICE" <<'EOF' | tee "$OUT/summary.md"
import json, re, sys, xml.etree.ElementTree as ET
from pathlib import Path

out, status, device = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
print(f"# GPU check ({device})\n")
for name, result in re.findall(r"^== ([\w-]+): (exit \d+|skipped.*)", (out / "check.log").read_text(),
                               re.M):
    print(f"- {name}: {result.split(' after ')[0]}")
junit = out / "pytest-cuda.xml"
if junit.is_file():
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    print("\nCUDA tests: {tests} run, {failures} failed, {errors} errors, {skipped} skipped"
          .format(**suite.attrib))
compared = [out / name for name in ("compare_tiny.json", "compare_test.json")]
if any(path.is_file() for path in compared):
    print("\nThe same sentences decoded on two devices (a few may differ where two words' scores"
          " tie to floating-point precision):\n")
for path in filter(Path.is_file, compared):
    report = json.loads(path.read_text())
    for method, m in report["methods"].items():
        print(f"- {path.name}: {method}: {m['differing']} of {m['sentences']} best hypotheses"
              f" differ ({' vs '.join(report['devices'])})")
bench = next(out.glob("bench*.md"), None)
if bench is not None and bench.read_text().count("failed: "):
    print(f"\n{bench.name}: {bench.read_text().count('failed: ')} failed measurement(s)")
if status:
    print(f"\nVerdict: a step failed (exit {status}); see check.log.")
else:
    print("\nVerdict:", "the GPU path works here." if device == "cuda" else
          "every step ran (a dry run on the CPU, at tiny sizes).")
EOF
exit "$STATUS"
