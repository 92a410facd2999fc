# Two commands do all set-up on a fresh machine:
#   make demo   installs semzoo into .venv and trains the default job (`semzoo train`, no flags): SEM-QMIX on SMAX 3m
#               for 100k env steps (5-6 minutes on an idle 2-core machine; scripts/measure_demo.py re-measures it)
#   make test   installs semzoo into .venv and runs the test suite
#   make lint   ruff and mypy (CI runs it before the tests)
#   make test-isa  the golden and exactness tests under a second vector ISA (CI runs it after the tests)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXTRAS ?= test,lint,mpe,smax,ray,tensorboard,plot

.PHONY: install demo test test-isa test-long lint bench

$(BIN)/semzoo: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, pinned to the local CPU build: a bare range would pull CUDA wheels
	$(BIN)/python -m pip install -q torch==2.13.0
	# PYTHONWARNINGS quiets setuptools' editable-install banner (printed by the build backend, not an error)
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $(BIN)/semzoo

install: $(BIN)/semzoo

demo: install
	$(BIN)/semzoo train

test: install
	$(BIN)/python -m pytest -n 2 -q

# The golden and exactness tests again under another vector ISA than the machine's own (CI runs it after `make
# test`): the golden rows must hold (tests/golden_runs.py pins them), two runs of a seed and a resumed run must
# still agree bit for bit.
ISA_TESTS := tests/test_golden.py tests/test_checkpoint.py tests/test_overlap.py tests/test_kill_resume.py
test-isa: install
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest -n 2 -q $(ISA_TESTS)

lint: install
	$(BIN)/ruff check semzoo envs wrappers tests scripts
	$(BIN)/mypy

test-long: install
	$(BIN)/python -m pytest -n 2 -q -m long

bench: install
	$(BIN)/python scripts/bench_train.py
