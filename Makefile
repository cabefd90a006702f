# The Makefile is the interface: every job creates .venv from nothing when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HYPOTHESIS_PROFILE ?= ci

.PHONY: help check test lint typecheck pytest fixtures deep crosshair hunt clean

help:
	@echo "make check     - the main job: check impl.RadixCache against the spec (ci profile)"
	@echo "make test      - mypy --strict, then the whole test suite (ci profile)"
	@echo "make deep      - long exploration: prefixspec check --profile deep (example database in .hypothesis/)"
	@echo "make hunt      - plant the seed's twelve bugs in impl/ and show what catches each"
	@echo "make fixtures  - regenerate the golden traces from the spec"
	@echo "make lint      - mypy --strict on spec, impl and stateful_tests"
	@echo "make clean     - remove .venv and caches"
	@echo "k=EXPR narrows pytest (make test k=eviction)"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

check: $(STAMP)
	$(BIN)/prefixspec check --profile ci

lint typecheck: $(STAMP)
	$(BIN)/mypy --strict spec impl stateful_tests

pytest: $(STAMP)
	$(BIN)/pytest -q $(if $(k),-k "$(k)")

crosshair: $(STAMP)
	$(BIN)/python -m spec.crosshair_gate

test: lint crosshair pytest

fixtures: $(STAMP)
	$(BIN)/python -m spec.trace generate fixtures/radix_trace.txt

# The long exploration: both machines, thousands of examples, failures kept in .hypothesis/.
deep: $(STAMP)
	$(BIN)/prefixspec check --profile deep --out counterexamples/deep

hunt: $(STAMP)
	$(BIN)/prefixspec hunt

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .hypothesis
