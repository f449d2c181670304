# rnnsearch: every target a user types. The first use creates .venv and installs the pinned stack.
PY      := .venv/bin/python
STAMP   := .venv/.installed
export PYTHONPATH := $(CURDIR)/src
export PATH := $(CURDIR)/.venv/bin:$(PATH)

.PHONY: setup help repro test test-fast ui bench preset experiment paper-curve-data paper-curve-report \
	gpu-preflight gpu-rehearsal gpu-results clean-venv
TEST_JOBS ?= 2
PYTEST  := $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile

## Create .venv and install the pinned stack (every other target does this first).
setup: $(STAMP)

## This list: every target and what it does.
help:
	@awk 'function show(target, text,   n, words, i, line) { \
	        print "make " target; n = split(text, words, " "); line = "   "; \
	        for (i = 1; i <= n; i++) { \
	          if (length(line) + length(words[i]) > 95) { print line; line = "   " } \
	          line = line " " words[i] } \
	        print line } \
	     /^## /{doc = doc " " substr($$0, 4); next} \
	     /^[a-z-]+:/{if (doc) {split($$0, t, ":"); show(t[1], doc)}} \
	     {doc = ""}' $(firstword $(MAKEFILE_LIST))

$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -c constraints.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $(STAMP)

## The main job: every DVC stage on the default params.yaml.
repro: $(STAMP)
	dvc repro

## The test suite (unit tests plus a tiny end-to-end DVC run), TEST_JOBS test files at a time
## (pytest-xdist; a file's tests stay on one worker, so its module fixtures are built once).
## 2 workers on the 2-core build machines: 8.5 min instead of 11.4. TEST_JOBS=0 runs serially.
test: $(STAMP)
	$(PYTEST)

## Unit tests only (skips the tests marked slow).
test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

## The MLflow UI on http://127.0.0.1:5000 over the project's tracking store; the bare address
## opens the experiment's runs table, every page in MLflow's model-training view (rnnsearch.ui_app).
## PORT=5001 for another port (one in use is refused). Ctrl-C or SIGTERM stops the server and all
## it started (exec: make's SIGTERM reaches the UI itself, not a shell in between).
ui: $(STAMP)
	exec $(PY) -m rnnsearch.tracking ui --host 127.0.0.1 --port $${PORT:-5000}

## Speed benchmark: writes reports/bench.json and reports/bench.md.
bench: $(STAMP)
	$(PY) -m rnnsearch.bench

## Run a preset as a temporary DVC experiment, the default run left alone: make preset NAME=quick |
## NAME=luong | NAME=luong_variants | NAME=paper (presets/<name>.yaml). Results: dvc exp show, git
## branch preset/<name>, and its report copied to reports/presets/<name>/.
preset: $(STAMP)
	$(if $(NAME),,$(error make preset needs NAME=<preset>: one of $(basename $(notdir $(wildcard presets/*.yaml)))))
	$(PY) -m rnnsearch.presets run $(NAME)

## Your own experiment, run as a preset (the default run and its committed results left alone):
## make experiment NAME=envi PARAMS=my.yaml, where my.yaml holds the params you change (e.g. a
## prepare section naming your corpus files); copied to presets/<NAME>.yaml, results in
## reports/presets/<NAME>/, the git branch preset/<NAME> and dvc exp show.
experiment: $(STAMP)
	$(if $(and $(NAME),$(PARAMS)),,$(error make experiment needs NAME=<name> PARAMS=<your params overrides file>))
	$(PY) -m rnnsearch.presets run $(NAME) --from $(PARAMS)

## The paper-width curve (scripts/gpu_paper_curve.sh): its data, prepared and tokenised by the real
## stages and packed for the GPU command (data/paper_curve/pack.tar.xz, about 2 minutes) ...
paper-curve-data: $(STAMP)
	$(PY) -m rnnsearch.experiments.paper_curve pack

## ... and its report from the files the GPU run returned: make paper-curve-report RESULTS=<dir>
## (or RESULTS=<files_at>/paper_curve.tar.gz from scripts/gpu_session.sh --with-paper-curve)
paper-curve-report: $(STAMP)
	$(if $(RESULTS),,$(error make paper-curve-report needs RESULTS=<the GPU run's folder or paper_curve.tar.gz>))
	$(PY) -m rnnsearch.experiments.paper_curve report --results $(RESULTS)

## Before a lent GPU's minutes are spent: what scripts/gpu_session.sh --with-paper-curve would
## carry (the pack, the search-50 model), its size against the device tool's 64 MiB, and the call.
gpu-preflight:
	@bash scripts/gpu_preflight.sh

## Before that: the GPU session's dry run under the GPU machine's python packages (torch 2.11,
## no mlflow, dvc, gensim or sacremoses) in .venv-gpu, built the first time (about 5 GB)
gpu-rehearsal:
	@bash scripts/gpu_rehearsal.sh

## After that call: its returned files into the project (reports/bench_gpu.*, the paper curve's
## report, reports/gpu_session/) and a summary: make gpu-results FILES=<files_at>
gpu-results: $(STAMP)
	$(if $(FILES),,$(error make gpu-results needs FILES=<the folder the device call returned>))
	@bash scripts/gpu_results.sh $(FILES)

## Remove .venv (the next target reinstalls it).
clean-venv:
	rm -rf .venv
