# Two commands do all the set-up on a fresh machine (see README.md):
#   make lab   - install into .venv, install the kernel specs, open JupyterLab on notebooks/
#   make test  - install into .venv (and Debian's chromium for the browser test), run the suite
# While editing: make test-fast (lint, types and the `not slow` tier: no process, compiler or browser,
# under a minute); make test-slow (the rest); make test-gpu (the CUDA/NCCL paths).
# Every step is idempotent: a stamp file records that .venv matches pyproject.toml.

# The interpreter .venv is made from. Unset, the first of these that can make a venv: the
# distribution's own CPython (Debian and Ubuntu build /usr/bin/python3.X with profile-guided
# optimization, linked statically), then whatever `python3` is. Everything the suite and the
# explorer's processes do is mostly Python bytecode (torch's import alone is ~1 s of it), and a
# plain source build such as pyenv's default (no PGO, --enable-shared) runs it slower: on the 2-core
# VM the fast tier took 1.3x less CPU in a venv of Debian's 3.11 than of pyenv's 3.11.7 side by
# side, files that start processes 1.1x (benchmarks/suite_venv_ab.sh, benchmarks/RESULTS.md).
# PYTHON=... picks one.
PYTHON ?=
PYTHON_CANDIDATES := /usr/bin/python3.11 /usr/bin/python3.12 /usr/bin/python3.10 python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.explorer-installed
PYTEST_ARGS ?=
# The whole suite runs on this many pytest-xdist workers: one more than CI's 2 cores, because
# a test that waits (a timeout it proves, a hung job it diagnoses, a browser that renders) leaves
# a core idle that a third worker fills: 14 min 36 s against 15 min 34 s with two on the 2-core VM
# (tests/SLOWEST.md). PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 3
LAB_ARGS ?=
ROOT_FLAG := $(shell [ "$$(id -u)" = "0" ] && echo --allow-root)

.PHONY: install kernels chromium bytecode lint lab test test-fast test-slow test-gpu bench clean

$(BIN)/python:
	@for p in $(or $(PYTHON),$(PYTHON_CANDIDATES)); do \
	  command -v $$p >/dev/null 2>&1 || continue; \
	  if $$p -m venv $(VENV) >/dev/null 2>&1; then echo "$(VENV): made with $$p"; break; fi; \
	  rm -rf $(VENV); \
	done; \
	test -x $(BIN)/python || { echo "no Python could make $(VENV) (tried: $(or $(PYTHON),$(PYTHON_CANDIDATES))); on Debian or Ubuntu apt-get install python3-venv, or set PYTHON=/path/to/python3.10+" >&2; exit 2; }
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel

# torch_xla 2.9 needs exactly torch 2.9.0 (the registry's CUDA build: large, but it runs on CPU).
# deepspeed is an sdist that builds against the installed torch, hence --no-build-isolation;
# the tests read its real pipeline schedule module, and 0.8.1's (before the seed's fix) from
# its source distribution.
$(STAMP): pyproject.toml setup.py explorer/pipeline/analysis/_kernels.c explorer/xla/hlo/_kernels.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[all]"
	$(BIN)/python -m pip install --quiet --no-build-isolation "deepspeed==0.19.8"
	$(BIN)/python -m pip download --quiet --no-deps --no-binary :all: "deepspeed==0.8.1" -d $(VENV)/sdists
	touch $(STAMP)

install: $(STAMP) kernels

# The notebooks name these kernels; they go into the venv's own Jupyter data dir.
kernels: $(STAMP)
	$(BIN)/jupyter kernelspec install --sys-prefix --replace kernels/explorer >/dev/null
	$(BIN)/jupyter kernelspec install --sys-prefix --replace kernels/explorer-xla >/dev/null

# Browsers cannot be downloaded here (no `playwright install`): use Debian's chromium.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null; }

lab: install
	$(BIN)/jupyter lab $(ROOT_FLAG) --notebook-dir=notebooks $(LAB_ARGS)

# Lint, format and types are checked first: a slip fails fast, before the long tiers.
# pyrefly reads [tool.pyrefly] in pyproject.toml (the package, default preset, Python 3.10)
# and the types of what is installed in $(VENV).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pyrefly check --python-interpreter-path $(BIN)/python

# Bytecode for the project's own modules, written once: an environment with
# PYTHONDONTWRITEBYTECODE set (some CI images and sandboxes) otherwise compiles every module from
# source again in each of the suite's thousands of processes (about 0.4 s of CPU for
# `explorer --help` alone). Python still reads bytecode it did not write; stale files are ignored.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q explorer tests benchmarks >/dev/null

# The whole suite, every tier (PYTEST_ARGS may add its own -m, e.g. '-m "not browser"').
test: install chromium lint bytecode
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# The tiers on their own. A tier that selects nothing under PYTEST_ARGS exits 0 (tests/conftest.py).
test-fast: install lint bytecode
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not slow" $(PYTEST_ARGS)

test-slow: install chromium bytecode
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m slow $(PYTEST_ARGS)

# The gpu tests, skipped (with the reason) where torch sees no CUDA device. Needs no network:
# a GPU machine's own python (its torch) runs them when there is no venv; only the files that
# hold gpu tests are collected, so nothing else of the suite needs to be installed there.
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,$(or $(PYTHON),python3))
GPU_TESTS  := $(shell grep -rl --include='test_*.py' 'pytest.mark.gpu\b' tests)
test-gpu:
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PYTHON) -m pytest -m gpu -rs -p no:cacheprovider $(GPU_TESTS) $(PYTEST_ARGS)

# Every benchmark, one after the other; a script exits 1 when it misses its goal, which is
# reported here without stopping the others (the figures go to benchmarks/RESULTS.md by hand).
bench: install
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || echo "!! $$b missed a goal (exit $$?)"; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
