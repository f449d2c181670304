# rnnsearch: every target a user types. The first use creates .venv and installs the pinned stack.
PY      := .venv/bin/python
STAMP   := .venv/.installed
export PYTHONPATH := $(CURDIR)/src
export PATH := $(CURDIR)/.venv/bin:$(PATH)
# word2vec's BLAS (numpy's OpenBLAS) on the same kernels on every x86 CPU, as the committed run
# was made (docs/reproducibility.md); a value in your environment wins.
export OPENBLAS_CORETYPE ?= Haswell

.PHONY: setup help repro test ui bench bench-full preset experiment exps translate default gpu-check \
	test-fast constraints clean-venv
TEST_JOBS ?= 2
OUT     ?= gpu-check
PYTEST  := $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder --durations=15

### A user's targets

## Create .venv and install the pinned stack (every other target does this first).
setup: $(STAMP)

## The main job: every DVC stage on the default params.yaml.
repro: $(STAMP)
	dvc repro

## The test suite (unit tests plus a tiny end-to-end DVC run), TEST_JOBS test files at a time
## (pytest-xdist; a file's tests stay on one worker, so its module fixtures are built once).
## TEST_JOBS=0 runs serially.
test: $(STAMP)
	$(PYTEST)

## The MLflow UI on http://127.0.0.1:5000 over the project's tracking store; the bare address
## opens the experiment's runs table, every page in MLflow's model-training view (rnnsearch.ui_app).
## PORT=5001 for another port (one in use is refused). Ctrl-C or SIGTERM stops the server and all
## it started (exec: make's SIGTERM reaches the UI itself, not a shell in between).
ui: $(STAMP)
	exec $(PY) -m rnnsearch.tracking ui --host 127.0.0.1 --port $${PORT:-5000}

## Speed benchmark, about a minute on 2 cores: training tokens/s and decoding sentences/s per
## model with the share of their GEMM roofline, into reports/bench.{json,md} (a GPU's, where torch
## sees one, into reports/bench_gpu.*); rows a busy machine moved are marked, and each row is put
## beside the previous report of this machine.
bench: $(STAMP)
	$(PY) -m rnnsearch.bench

## The benchmark's full study (about 5 minutes on 2 cores): make bench's report plus decoding
## one sentence at a time and with the exact stopping rule, and torch.profiler's tables of a
## training step and a decoding batch.
bench-full: $(STAMP)
	$(PY) -m rnnsearch.bench --full

## Run a preset as a temporary DVC experiment, the default run left alone: make preset NAME=quick |
## NAME=luong | NAME=luong_variants | NAME=subword | NAME=quick_bpe | NAME=paper
## (presets/<name>.yaml). Results: dvc exp show, git branch preset/<name>, and its report copied
## to reports/presets/<name>/. NAME="A B": A then B, B reusing (DVC's run cache) what A trained.
preset: $(STAMP)
	$(if $(NAME),,$(error make preset needs NAME=<preset>: one of $(basename $(notdir $(wildcard presets/*.yaml)))))
	$(PY) -m rnnsearch.presets run $(foreach name,$(NAME),'$(subst ','\'',$(name))')

## Your own experiment, run as a preset (the default run and its committed results left alone):
## make experiment NAME=envi PARAMS=my.yaml, where my.yaml holds the params you change (e.g. a
## prepare section naming your corpus files); copied to presets/<NAME>.yaml, results in
## reports/presets/<NAME>/, the git branch preset/<NAME> and dvc exp show.
experiment: $(STAMP)
	$(if $(and $(NAME),$(PARAMS)),,$(error make experiment needs NAME=<name> PARAMS=<your params overrides file>))
	$(PY) -m rnnsearch.presets run '$(subst ','\'',$(NAME))' --from '$(subst ','\'',$(PARAMS))'

## The experiments beside the workspace, narrow enough for any terminal: the params each one
## changed, then a row per experiment and grid cell with its BLEU, BLEU on No UNK and dev
## perplexity (metrics/summary/; plain dvc exp show has every param and metric, some 300
## columns). Their curves beside the workspace's: dvc plots diff <experiment> (works offline).
exps: $(STAMP)
	@$(PY) -m rnnsearch.runs.exps

## Translate with an experiment's model, the workspace left alone: make translate NAME=deen
## CELL=search-50 [INPUT=file] (stdin by default; python -m rnnsearch.presets translate NAME CELL
## takes every option of python -m rnnsearch.decoding.cli, e.g. --align).
translate: $(STAMP)
	$(if $(and $(NAME),$(CELL)),,$(error make translate needs NAME=<experiment> CELL=<grid cell>))
	$(PY) -m rnnsearch.presets translate '$(subst ','\'',$(NAME))' '$(subst ','\'',$(CELL))' \
		$(if $(INPUT),'$(subst ','\'',$(INPUT))')

## Bring the committed default run back into the workspace (after editing params.yaml and
## make repro, or dvc exp apply): your changes to params.yaml, dvc.lock, metrics, plots and
## reports go to git stash (git stash pop brings them back), then dvc checkout restores the
## default run's data/ from this clone's DVC cache, as much as it holds (a fresh clone: none).
default: $(STAMP)
	@git diff --quiet -- params.yaml dvc.lock metrics plots reports data/code || { \
		git stash push -q -m "workspace before make default" -- params.yaml dvc.lock metrics \
			plots reports data/code && \
		echo "make default: your changes to params.yaml, dvc.lock, metrics, plots and reports" \
			"are in git stash (git stash pop brings them back)"; }
	@dvc checkout --allow-missing
	@echo "make default: the committed default run's params, metrics and reports; data/ holds" \
		"what this clone's DVC cache has of it (dvc status lists the rest; make repro rebuilds it)"

## Does the GPU path work on this machine? The CUDA tests, the GPU benchmark, and decoding on
## the CPU against the GPU (a tiny model, and the default run's search-50 model on the committed
## test set when make repro has trained it), in under ten minutes: make gpu-check [OUT=gpu-check]
## writes summary.md (a verdict line), check.log and every result into OUT (scripts/gpu_check.sh).
gpu-check: $(STAMP)
	@PYTHON=$(PY) OUT=$(OUT) bash scripts/gpu_check.sh

### A contributor's targets

## Unit tests only (skips the tests marked slow).
test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

## Regenerate constraints.txt, the lock of every package the pinned requirements.txt pulls in
## (exact versions; torch stays in requirements.txt), from a scratch venv: after a change to
## requirements.txt, then make clean-venv and make test.
constraints:
	rm -rf .venv-lock && python3 -m venv .venv-lock
	.venv-lock/bin/pip install -q -r requirements.txt
	.venv-lock/bin/pip freeze --exclude-editable | grep -v '^torch==' > constraints.txt
	rm -rf .venv-lock

## Remove .venv (the next target reinstalls it).
clean-venv:
	rm -rf .venv

## This list: every target and what it does, a user's first.
help:
	@awk 'function show(target, text,   n, words, i, line) { \
	        print "make " target; n = split(text, words, " "); line = "   "; \
	        for (i = 1; i <= n; i++) { \
	          if (length(line) + length(words[i]) > 95) { print line; line = "   " } \
	          line = line " " words[i] } \
	        print line } \
	     /^### /{print ""; print substr($$0, 5); print ""; next} \
	     /^## /{doc = doc " " substr($$0, 4); next} \
	     /^[a-z-]+:/{if (doc) {split($$0, t, ":"); show(t[1], doc)}} \
	     {doc = ""}' $(firstword $(MAKEFILE_LIST))

# The packages' bytecode is compiled once, on every core (pip compiles file by file, on one):
# where PYTHONDONTWRITEBYTECODE is set nothing else would write it. As with pip's own compile, a
# file this Python cannot parse (torch's Python 3.12 test helpers) is skipped, not an error.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --no-compile --upgrade pip
	$(PY) -m pip install -q --no-compile -r requirements.txt -c constraints.txt
	$(PY) -m pip install -q --no-compile -e . -c constraints.txt
	$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
	    > /dev/null || true
	touch $(STAMP)
