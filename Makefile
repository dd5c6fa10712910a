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

.PHONY: help demo test test-all bench lint nightly report-kernels report-history clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP) ## create .venv and install tracewh into it (automatic)

demo: $(STAMP) ## generate a 14-night x 2-rank history, ingest it, show top kernels, gaps and the regression check
	@echo "== 1. synthesise 14 nights x 2 ranks into $(DEMO_DIR) (a +30% flash-attention slowdown from 2025-01-10)"
	$(TW) synth $(DEMO_DIR) --runs 14 --ranks 2 --start 2025-01-01 --steps 4 --seed 7 \
		--regress 'flash_fwd:+30%@2025-01-10'
	@echo "== 2. ingest into $(WAREHOUSE) (idempotent: a second make demo skips what is there)"
	$(TW) ingest $(DEMO_DIR) -w $(WAREHOUSE) --jobs 2
	@echo "== 3. top kernels of the latest run"
	$(TW) kernels -w $(WAREHOUSE) --group-by short_name --top 10
	@echo "== 4. where the GPU waited: stream gaps and idle breakdown of the latest run"
	$(TW) gaps -w $(WAREHOUSE)
	$(TW) steps -w $(WAREHOUSE)
	@echo "== 5. regression check of the latest night against the previous ones (exit 1 = regression)"
	@$(TW) check -w $(WAREHOUSE) && echo "no regression" || echo "(check exited $$?: the injected regression was found, as expected)"

test: $(STAMP) ## run the default test suite (fast; no tests marked slow)
	$(BIN)/python -m pytest -q

test-all: $(STAMP) ## run every test, including those marked slow
	$(BIN)/python -m pytest -q -m 'slow or not slow'

bench: $(STAMP) ## run the benchmarks (ratios side by side, peak memory)
	$(BIN)/python -m bench.run

lint: $(STAMP) ## ruff, mypy --strict and the import-linter contracts
	$(BIN)/ruff check tracewh tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

clean: ## remove generated data, warehouse and reports (keeps .venv)
	rm -rf $(WAREHOUSE) $(DEMO_DIR) $(REPORT_DIR)
