# Two commands do all set-up on a fresh machine:
#   make demo   installs semzoo into .venv and trains the default job (`semzoo train`): SEM-QMIX on SMAX 3m for 20k
#               env steps, tested every 2k steps (--test-interval 2000) so that the win rate shows it learning
#               (67 s of training on an idle 2-core Intel Xeon, plus the install; scripts/measure_demo.py
#               re-measures it)
#   make test   installs semzoo into .venv and runs the test suite, less its slow tests (the `slow` mark: the tests of
#               25 s or more); `make test-slow` runs those, and CI runs both
#   make lint   ruff and mypy (CI runs it before the tests)
#   make docs   the documentation site (MkDocs, Material theme) from docs/ into site/, strict: a broken link,
#               anchor or docstring reference fails it (CI runs it)
#   make test-isa  the exactness tests under a second vector ISA, the golden rows under ATen's other kernels (CI runs it)
#   make test-pythons  a smoke subset under the lowest and the highest Python that pyproject.toml declares (CI runs it)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXTRAS ?= test,lint,mpe,smax,lbf,ray,tensorboard,plot

.PHONY: install demo test test-slow test-isa test-pythons test-long lint bench docs

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
	$(BIN)/semzoo train --test-interval 2000

test: install
	$(BIN)/python -m pytest -n 2 -q

test-slow: install
	$(BIN)/python -m pytest -n 2 -q -m slow

# The exactness tests under another vector ISA than the machine's own, then the golden rows under ATen's other
# kernels (CI runs it after `make test`, which checks the golden rows under the recording's pin, ATen's default
# kernels). Two runs of a seed and a resumed run must still agree bit for bit; the golden rows must hold with the
# children's ATen kernels set by SEMZOO_GOLDEN_ISA (tests/golden_runs.py; MKL, oneDNN and XLA stay pinned). An ISA
# this CPU lacks, or one that gives the same kernels as an ISA already run (native is AVX2 on many AMD CPUs), is
# skipped with a line. Each golden pass ends with a line naming the ISA each child ran under.
EXACTNESS_TESTS := tests/test_checkpoint.py tests/test_overlap.py tests/test_kill_resume.py
GOLDEN_ISAS := avx2 avx512 native
test-isa: install
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest -n 2 -q -m 'not long' $(EXACTNESS_TESTS)
	@set -e; done=""; for isa in $(GOLDEN_ISAS); do \
	  skip=$$($(BIN)/python tests/golden_runs.py --isa-unavailable $$isa $$done); \
	  if [ -n "$$skip" ]; then echo "test-isa: golden rows under $$isa skipped: $$skip"; continue; fi; \
	  echo "test-isa: golden rows with SEMZOO_GOLDEN_ISA=$$isa"; \
	  SEMZOO_GOLDEN_ISA=$$isa $(BIN)/python -m pytest -n 2 -q -m 'not long' tests/test_golden.py -k test_seeded_run; \
	  done="$$done $$isa"; \
	done

# The lowest and the highest Python of pyproject.toml's requires-python and classifiers, each with its own venv
# (.venv-py3.13 ...) built from pyenv's interpreter, running a smoke subset: the actor process, the matrix games,
# SMAX (JaxMARL on that Python) and whole training runs. A Python that is .venv's own is skipped with a line:
# `make test` runs the whole suite under it. A declared Python missing from $(PYENV_ROOT) FAILS the target rather
# than skipping it: CI runs on the machine image that ships them, and a skipped check would leave the declared
# range untested without a word. Fix: `pyenv install 3.13` (or set PYENV_ROOT). Measured on the 2-core machine
# beside other engineers' jobs (load 17-21), pip cache warm: build 13 min 6 s, smoke subset 12 min 50 s
# (137 passed, 1 skipped), 5 min 20 s of CPU in all, so a few minutes on an idle machine; later runs reuse the venv.
PY_LOWEST := 3.11
PY_HIGHEST := 3.13
PYENV_ROOT ?= $(HOME)/.pyenv
SMOKE_EXTRAS := test,smax,mpe
SMOKE_TESTS := tests/test_actor.py tests/test_matrix_games.py tests/test_smax.py tests/test_train.py
test-pythons: install
	@set -e; own=$$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	for v in $(PY_LOWEST) $(PY_HIGHEST); do \
	  if [ "$$own" = "$$v" ]; then echo "test-pythons: Python $$v is .venv's own: make test runs the whole suite under it"; continue; fi; \
	  py=$$(ls -d $(PYENV_ROOT)/versions/$$v.*/bin/python 2>/dev/null | sort -V | tail -n 1); \
	  if [ -z "$$py" ]; then echo "test-pythons: Python $$v (declared in pyproject.toml) is missing from $(PYENV_ROOT)/versions; fix: pyenv install $$v"; exit 1; fi; \
	  venv=.venv-py$$v; \
	  if [ ! -x $$venv/bin/semzoo ] || [ pyproject.toml -nt $$venv/bin/semzoo ]; then \
	    echo "test-pythons: building $$venv from $$py"; rm -rf $$venv; $$py -m venv $$venv; \
	    $$venv/bin/python -m pip install -q --upgrade pip; \
	    $$venv/bin/python -m pip install -q torch==2.13.0; \
	    PYTHONWARNINGS=ignore $$venv/bin/python -m pip install -q -e ".[$(SMOKE_EXTRAS)]"; \
	    touch $$venv/bin/semzoo; \
	  fi; \
	  echo "test-pythons: $$($$venv/bin/python --version): $(SMOKE_TESTS)"; \
	  $$venv/bin/python -m pytest -n 2 -q -m 'not long' $(SMOKE_TESTS); \
	done

# The docs extra goes into .venv on first use (the stamp file), so `make install` stays as it was.
$(VENV)/.docs-installed: pyproject.toml $(BIN)/semzoo
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install -q -e ".[$(EXTRAS),docs]"
	touch $@

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: install
	$(BIN)/ruff check semzoo envs wrappers tests scripts
	$(BIN)/mypy

# The long learning tests (the `long` mark, 11 tests): the main job and QMIX learning to win SMAX 3m, the matrix-game
# optima over 5-10 seeds, the SMAX soaks on the big maps, K runs in one process learning as single runs. CI does not
# run them (QMIX's 100k-step run alone is about 4 min of one core, as long as the main job was at 100k steps); run
# them before a release and after any change on the learning path (learners, mixers, memories, the trainer, SMAX's
# wrapper) or to a default of TrainConfig.
test-long: install
	$(BIN)/python -m pytest -n 2 -q -m long

bench: install
	$(BIN)/python scripts/bench_train.py
