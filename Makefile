# Two commands do all set-up on a fresh machine:
#   make demo   installs semzoo into .venv and trains the default job (`semzoo train`, no flags): SEM-QMIX on SMAX 3m
#               for 100k env steps (5-6 minutes on an idle 2-core machine; scripts/measure_demo.py re-measures it)
#   make test   installs semzoo into .venv and runs the test suite
#   make lint   ruff and mypy (CI runs it before the tests)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXTRAS ?= test,lint,mpe,smax,ray,tensorboard,plot

.PHONY: install demo test test-long lint bench

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

lint: install
	$(BIN)/ruff check semzoo envs wrappers tests scripts
	$(BIN)/mypy

test-long: install
	$(BIN)/python -m pytest -n 2 -q -m long

bench: install
	$(BIN)/python scripts/bench_train.py
