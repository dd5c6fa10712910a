# tracewh: a columnar trace warehouse for GPU profiler traces.
# `make help` lists the targets. `make demo` and `make test` work on a fresh clone.
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
SHELL := /bin/bash

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WAREHOUSE ?= ./warehouse
DEMO_DIR ?= data/demo
REPORT_DIR ?= reports
NIGHTLY_DIR ?=
TRACES ?= ../shared/traces
TW := $(BIN)/tracewh
TORCH_VERSION ?= 2.13.0
CAPTURE_STAMP := $(VENV)/.capture-installed
# pytest workers (pytest-xdist): one per core; each test file runs whole on one worker, so a
# module's fixtures are built once. TEST_JOBS=0 runs the suite in this process, serially.
TEST_JOBS ?= auto

.PHONY: help venv capture-deps hta-venv demo test test-all bench lint docs docs-ref docs-serve docs-check package sample device-check nightly report report-kernels report-history clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml setup.py .ci/constraints-dev.txt tracewh/ingest/_fastshred.c tracewh/ingest/_fastscan.c tracewh/ingest/_fastscan.h tracewh/ingest/_fastarrow.c tracewh/ingest/_fastminhash.c
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c .ci/constraints-dev.txt -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP) ## create .venv and install tracewh into it (automatic)

# The CPU build of torch for the tracewh.capture tests (a local wheel on these machines;
# the capture tests skip when torch is missing).
$(CAPTURE_STAMP): $(STAMP)
	@$(BIN)/python -c "import torch" 2>/dev/null || \
	  $(BIN)/pip install --quiet 'torch==$(TORCH_VERSION)' || \
	  echo "torch==$(TORCH_VERSION) could not be installed: the tracewh.capture tests will skip"
	@touch $@

capture-deps: $(CAPTURE_STAMP) ## install the CPU build of torch for tracewh.capture (automatic in make test)

demo: $(STAMP) ## generate a 14-night x 2-rank history, ingest it, show top kernels, gaps and the regression check
	@echo "== 1. synthesise 14 nights x 2 ranks into $(DEMO_DIR) (a +30% flash-attention slowdown from 2025-01-13)"
	$(TW) synth $(DEMO_DIR) --runs 14 --ranks 2 --start 2025-01-01 --steps 4 --seed 7 \
		--regress 'flash_fwd:+30%@2025-01-13'
	@echo "== 2. ingest into $(WAREHOUSE) (idempotent: a second make demo skips what is there)"
	$(TW) ingest $(DEMO_DIR) -w $(WAREHOUSE) --jobs 2
	@echo "== 3. top kernels of the latest run"
	$(TW) kernels -w $(WAREHOUSE) --group-by short_name --top 10
	@echo "== 4. where the GPU waited: stream gaps and idle breakdown of the latest run"
	$(TW) gaps -w $(WAREHOUSE)
	$(TW) steps -w $(WAREHOUSE)
	@echo "== 5. regression check of the latest night against the previous ones (exit 1 = regression)"
	@$(TW) check -w $(WAREHOUSE) && echo "no regression" || echo "(check exited $$?: the injected regression was found, as expected)"
	@echo "== 6. report with charts: $(REPORT_DIR)/demo/report.html (opens offline)"
	$(TW) report -w $(WAREHOUSE) --since 2025-01-01 --out $(REPORT_DIR)/demo

test: $(STAMP) $(CAPTURE_STAMP) ## run the default test suite (fast; no tests marked slow)
	$(BIN)/python -m pytest -q --durations=25 -n $(TEST_JOBS) --dist loadfile

test-all: $(STAMP) $(CAPTURE_STAMP) ## run every test, including those marked slow
	$(BIN)/python -m pytest -q -m 'slow or not slow' -n $(TEST_JOBS) --dist loadfile

# The reference analyser for bench_real: HTA (`traceinsight` on PyPI) in a bench-only venv,
# never a project dependency. Without it (no network) bench_real says so and skips HTA's side.
HTA_VENV := data/bench/hta-venv
HTA_STAMP := $(HTA_VENV)/.installed

$(HTA_STAMP):
	@mkdir -p $(dir $(HTA_VENV))
	@test -x $(HTA_VENV)/bin/python || $(PYTHON) -m venv $(HTA_VENV)
	@$(HTA_VENV)/bin/pip install --quiet traceinsight && touch $@ || \
	  echo "traceinsight could not be installed: bench_real runs without HTA"

hta-venv: $(HTA_STAMP) ## the bench-only venv with HTA (traceinsight), for bench_real (automatic in make bench)

bench: $(STAMP) $(HTA_STAMP) ## run the benchmarks (ratios side by side, peak memory; HTA in a bench-only venv; BIG=1: also the 1 GB/2 GB tiers)
	$(BIN)/python -m bench.run $(if $(BIG),--big,)

# On a CUDA/ROCm machine: tracewh capture 3 steps of a small transformer and of a diffusion-style
# loop, ingest them, print kernels/modules/steps/launches/roofline and the measured overhead.
# Without a GPU the script says SKIP (exit 77, which this target reports and treats as success).
DEVICE ?= auto
device-check: $(STAMP) $(CAPTURE_STAMP) ## GPU check of capture + analyses on two small models (DEVICE=cpu runs it on CPU)
	@bash examples/device_check.sh --device $(DEVICE) --python $(BIN)/python; rc=$$?; \
	  if [ $$rc -eq 77 ]; then echo "device-check skipped (exit 77)"; exit 0; fi; exit $$rc

lint: $(STAMP) ## ruff, mypy --strict and the import-linter contracts
	$(BIN)/ruff check tracewh tests bench examples docs
	$(BIN)/mypy
	$(BIN)/lint-imports

# The documentation site (docs/, mkdocs.yml): the reference pages under docs/reference/ are
# generated from the code (docs/gen_ref.py); `make docs` fails when they are stale.
docs: $(STAMP) ## build the documentation site into site/ (mkdocs build --strict: no warnings)
	$(BIN)/python docs/gen_ref.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs-check: $(STAMP) ## build the site and check it in headless Chromium: links, anchors, code blocks, images, search
	$(BIN)/python -m pytest -q -m slow -p no:randomly tests/test_docs_site.py

docs-ref: $(STAMP) ## regenerate the CLI and SQL reference pages (docs/reference/) from the code
	$(BIN)/python docs/gen_ref.py

docs-serve: $(STAMP) ## serve the documentation site on http://127.0.0.1:8000 with live reload
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The package as users get it: build the wheel and the sdist (python -m build), check their
# metadata (twine check --strict) and contents, install each into a fresh venv outside the
# checkout and run ingest (data/sample), kernels --format json (same rows as the checkout),
# every table command, report and --version there (.ci/package_check.py; CI runs it).
PACKAGE_DIR ?= build/package
package: $(STAMP) ## build wheel + sdist into $(PACKAGE_DIR), check them, install each outside the checkout and smoke-test it
	$(BIN)/python .ci/package_check.py --dist $(PACKAGE_DIR)

# The bundled sample (committed; `tracewh synth` writes the same bytes for the same options):
# 4 nights x 2 ranks, flash-attention 30% slower on the last night.
SAMPLE_DIR := data/sample
SAMPLE_SYNTH := --runs 4 --ranks 2 --start 2025-01-01 --steps 2 --layers 2 --seed 11 --regress 'flash_fwd:+30%@2025-01-04'
sample: $(STAMP) ## regenerate the bundled sample traces in data/sample (tracewh synth)
	rm -rf $(SAMPLE_DIR)
	$(TW) synth $(SAMPLE_DIR) $(SAMPLE_SYNTH)

clean: ## remove generated data, warehouse and reports (keeps .venv)
	rm -rf $(WAREHOUSE) $(DEMO_DIR) $(REPORT_DIR) site

# ---------------------------------------------------------------- nightly operation
# make nightly NIGHTLY_DIR=/data/traces/2025-01-08 [WAREHOUSE=...] [REPORT_DIR=...]
# Ingests the night's traces (one job: the directory), checks them against their comparable
# baseline and writes $(REPORT_DIR)/nightly/<night>/{ingest.log,check.json,check.md,report/}.
# Every output is written to a temporary name and renamed. A lock next to the warehouse keeps
# two runs from overlapping (a second one waits up to NIGHTLY_LOCK_WAIT seconds, then fails).
# Exit status: 0 clean; non-zero (make reports 2) on a regression, a failed ingest or bad usage;
# the outputs are written anyway and check.json's "status" says which.
RUN ?= latest
SINCE ?= 90d
KERNEL ?=
CATEGORY ?=
CHECK_ARGS ?=
NIGHTLY_LOCK ?= $(WAREHOUSE).lock
NIGHTLY_LOCK_WAIT ?= 3600
TRACEWH := $(abspath $(BIN))/tracewh

nightly: $(STAMP) ## ingest NIGHTLY_DIR, check it, write the report (non-zero exit on regression or failed ingest)
	@test -n "$(NIGHTLY_DIR)" && test -d "$(NIGHTLY_DIR)" || { echo "usage: make nightly NIGHTLY_DIR=<directory of one night's traces> [WAREHOUSE=...]" >&2; exit 2; }
	@mkdir -p "$(dir $(abspath $(NIGHTLY_LOCK)))"
	@set -u; exec 9> "$(NIGHTLY_LOCK)"; \
	flock -w $(NIGHTLY_LOCK_WAIT) 9 || { echo "nightly: another run holds $(NIGHTLY_LOCK)" >&2; exit 1; }; \
	night_dir="$(abspath $(NIGHTLY_DIR))"; night=$$(basename "$$night_dir"); \
	out="$(REPORT_DIR)/nightly/$$night"; mkdir -p "$$out"; rc=0; \
	echo "nightly: ingest $$night_dir -> $(WAREHOUSE)"; \
	$(TRACEWH) ingest "$$night_dir" -w "$(WAREHOUSE)" --job "$$night_dir" > "$$out/.ingest.log.tmp" 2>&1 || rc=1; \
	mv -f "$$out/.ingest.log.tmp" "$$out/ingest.log"; \
	if [ $$rc -ne 0 ]; then echo "nightly: some traces failed to ingest (see $$out/ingest.log)" >&2; fi; \
	crc=0; $(TRACEWH) check -w "$(WAREHOUSE)" --run "job=$$night_dir" --format json $(CHECK_ARGS) > "$$out/.check.json.tmp" || crc=$$?; \
	mv -f "$$out/.check.json.tmp" "$$out/check.json"; \
	$(TRACEWH) check -w "$(WAREHOUSE)" --run "job=$$night_dir" --format markdown $(CHECK_ARGS) > "$$out/.check.md.tmp" 2>&1 || true; \
	mv -f "$$out/.check.md.tmp" "$$out/check.md"; \
	if [ $$crc -ne 2 ] && $(TRACEWH) report --help > /dev/null 2>&1; then \
		rm -rf "$$out/.report.tmp"; \
		if $(TRACEWH) report -w "$(WAREHOUSE)" --run "job=$$night_dir" --out "$$out/.report.tmp" > /dev/null 2>&1; then \
			rm -rf "$$out/report"; mv "$$out/.report.tmp" "$$out/report"; \
		else rm -rf "$$out/.report.tmp"; echo "nightly: tracewh report failed (check.md is written)" >&2; fi; \
	fi; \
	cat "$$out/check.md"; echo "nightly: wrote $$out"; \
	if [ $$crc -ne 0 ] || [ $$rc -ne 0 ]; then exit 1; fi

report: $(STAMP) ## report of the latest run (RUN=...) with charts -> $(REPORT_DIR)/latest, and a static site -> $(REPORT_DIR)/site
	$(TW) report -w $(WAREHOUSE) --run $(RUN) --out $(REPORT_DIR)/latest
	$(TW) report -w $(WAREHOUSE) --site $(REPORT_DIR)/site

report-kernels: $(STAMP) ## kernel ranking of RUN (default latest) -> $(REPORT_DIR)/kernels.csv (+ kernels_by_category.csv)
	@mkdir -p $(REPORT_DIR)
	$(TRACEWH) kernels -w "$(WAREHOUSE)" --run "$(RUN)" --top 1000000 --format csv --out "$(REPORT_DIR)/kernels.csv" > /dev/null
	$(TRACEWH) kernels -w "$(WAREHOUSE)" --run "$(RUN)" --group-by category --top 1000000 --format csv --out "$(REPORT_DIR)/kernels_by_category.csv" > /dev/null
	@echo "wrote $(REPORT_DIR)/kernels.csv $(REPORT_DIR)/kernels_by_category.csv"

report-history: $(STAMP) ## history since SINCE (90d) of KERNEL or CATEGORY (default all GPU ops) -> $(REPORT_DIR)/history.csv
	@mkdir -p $(REPORT_DIR)
	$(TRACEWH) history -w "$(WAREHOUSE)" --since "$(SINCE)" $(if $(KERNEL),--kernel "$(KERNEL)") $(if $(CATEGORY),--category "$(CATEGORY)") --format csv --out "$(REPORT_DIR)/history.csv" > /dev/null
	@echo "wrote $(REPORT_DIR)/history.csv"
