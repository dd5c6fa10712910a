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
	$(BIN)/python -m tracewh.demo --data $(DEMO_DIR) --warehouse $(WAREHOUSE)

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
