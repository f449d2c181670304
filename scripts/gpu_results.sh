#!/usr/bin/env bash
# After the device call of gpu_session.sh: its returned files into the project, in one step.
#
#   bash scripts/gpu_results.sh <files_at>      (make gpu-results FILES=<files_at>)
#
# bench_gpu.{json,md} -> reports/ (the GPU benchmark's report); paper_curve.tar.gz -> the
# paper-width curve's report (reports/paper_curve/, by paper_curve report, which needs
# data/paper_curve/ from make paper-curve-data); session.log, pytest-cuda.xml and the
# compare_*.json -> reports/gpu_session/ (the evidence: what ran, how the CUDA tests ended, how
# many hypotheses differ between the CPU and the GPU). Then a short summary of each.
set -u
cd "$(dirname "$0")/.."
FILES=${1:?usage: bash scripts/gpu_results.sh <the folder the device call returned>}
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  [[ -x .venv/bin/python ]] && PYTHON=.venv/bin/python
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
[[ -d $FILES ]] || { echo "gpu_results: $FILES: no such folder" >&2; exit 2; }
STATUS=0

if compgen -G "$FILES/bench_gpu.*" >/dev/null; then
  cp "$FILES"/bench_gpu.json "$FILES"/bench_gpu.md reports/ && echo "reports/bench_gpu.{json,md}"
else
  echo "no bench_gpu.json: the bench did not run or was cut before its first save"
fi
mkdir -p reports/gpu_session
for name in session.log pytest-cuda.xml compare_tiny.json compare_test.json; do
  if [[ -f $FILES/$name ]]; then cp "$FILES/$name" reports/gpu_session/ && echo "reports/gpu_session/$name"; fi
done
if [[ -f $FILES/paper_curve.tar.gz ]]; then
  "$PYTHON" -m rnnsearch.experiments.paper_curve report --results "$FILES/paper_curve.tar.gz" \
    || STATUS=$?
fi

"$PYTHON" - "$FILES" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
from pathlib import Path

files = Path(sys.argv[1])
log = files / "session.log"
if log.is_file():
    print(*[line for line in log.read_text().splitlines() if line.startswith("gpu_session: done")][-1:])
bench = files / "bench_gpu.md"
if bench.is_file():
    text = bench.read_text()
    if "## Targets (issue 12)" in text:
        print("GPU bench targets:", text.split("## Targets (issue 12)", 1)[1].split("\n## ", 1)[0]
              .rstrip(), sep="")
    failed = text.count("failed: ")
    if failed:
        print(f"GPU bench: {failed} failed measurement{'s' * (failed != 1)} (reports/bench_gpu.md)")
junit = files / "pytest-cuda.xml"
if junit.is_file():
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    print("CUDA tests: {tests} run, {failures} failed, {errors} errors, {skipped} skipped"
          .format(**suite.attrib))
for name in ("compare_tiny.json", "compare_test.json"):
    path = files / name
    if path.is_file():
        report = json.loads(path.read_text())
        for method, m in report["methods"].items():
            print(f"{name}: {method}: {m['differing']} of {m['sentences']} best hypotheses differ"
                  f" ({' vs '.join(report['devices'])})")
EOF
exit "$STATUS"
