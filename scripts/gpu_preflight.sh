#!/usr/bin/env bash
# Before a GPU minute is spent: what the device call of `gpu_session.sh --with-paper-curve` would
# carry, checked here. Prints the sizes and the exact call to make; exit 1 when the curve's data
# is missing or the call would carry more than the device tool takes (64 MiB, the checkout's
# tracked and untracked-not-ignored files included).
#
#   bash scripts/gpu_preflight.sh     (make gpu-preflight)
#
# Carried: data/paper_curve/pack.tar.xz (make paper-curve-data); the default run's CELL model
# (default search-50) with data/tokenized/{test.src,vocab.src.txt,vocab.tgt.txt} when they are
# here (dvc repro train@search-50 makes them; without them the comparison on the real test set
# is skipped); .whl/ when there is one (wheels for packages the GPU machine lacks).
set -u
cd "$(dirname "$0")/.."
CELL=${CELL:-search-50}
MAX_BYTES=$((64 * 1024 * 1024))
PACK=data/paper_curve/pack.tar.xz
MODEL_FILES=("data/models/$CELL/model.pt" data/tokenized/test.src data/tokenized/vocab.src.txt
             data/tokenized/vocab.tgt.txt)
STATUS=0

bytes() { du -cb "$@" 2>/dev/null | tail -1 | cut -f1; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

carry=()
if [[ -f $PACK ]]; then
  carry+=("$PACK")
else
  echo "missing: $PACK (make paper-curve-data makes it, about 2 minutes)"
  STATUS=1
fi
have_model=1
for file in "${MODEL_FILES[@]}"; do [[ -f $file ]] || have_model=0; done
if ((have_model)); then
  carry+=("${MODEL_FILES[@]}")
else
  echo "note: no data/models/$CELL/model.pt with data/tokenized/: the comparison on the real" \
       "test set will be skipped (dvc repro train@$CELL makes them)"
fi
[[ -d .whl ]] && carry+=(.whl)

tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) \
        | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
carried=0
((${#carry[@]})) && carried=$(bytes "${carry[@]}")
total=$((tree + carried))
echo "checkout $(mib "$tree") + carried $(mib "$carried") = $(mib "$total") of $(mib "$MAX_BYTES")"
for path in "${carry[@]}"; do echo "  carry $path ($(mib "$(bytes "$path")"))"; done
if ((${#carry[@]} > 8)); then
  echo "too many paths: the device tool carries at most 8"
  STATUS=1
fi
if ((total > MAX_BYTES)); then
  echo "too big: the device tool takes at most $(mib "$MAX_BYTES") a call; carry less"
  STATUS=1
fi
if ((STATUS == 0)); then
  list=$(printf '"%s", ' "${carry[@]}")
  echo "device call:"
  echo "  run(command=\"bash scripts/gpu_session.sh --with-paper-curve\", timeout_s=600," \
       "carry=[${list%, }])"
  echo "then, here: make gpu-results FILES=<files_at>"
fi
exit "$STATUS"
