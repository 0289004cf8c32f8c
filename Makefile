# Two commands do all the set-up (README): `make demo` and `make test`.
# Both create .venv on first use. torch==2.13.0 goes in first: any other version
# (or none, when stable-baselines3 asks for torch) pulls gigabytes of CUDA wheels.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BUDGET ?= 32

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[test]"
	touch $(STAMP)

.PHONY: install demo test test-avx2 test-slow bench clean
install: $(STAMP)

demo: $(STAMP)
	$(BIN)/tensorgym tune Conv2d-ResNet-R5-v0 --agent random --budget $(BUDGET) --db tensorgym.db

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

# The fast suite again with this CPU acting as an AVX2 + FMA one (x86-64-v3): kernels compiled for AVX2,
# vendors restricted the same way, so the AVX2 path is tested whatever CPU runs it (CI runs both).
test-avx2: $(STAMP)
	TENSORGYM_CPU=x86-64-v3 $(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python bench/bench_measure.py

clean:
	rm -rf $(VENV) *.egg-info
