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

.PHONY: install demo test test-slow bench clean
install: $(STAMP)

demo: $(STAMP)
	$(BIN)/tensorgym tune Conv2d-ResNet-R5-v0 --agent random --budget $(BUDGET) --db tensorgym.db

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python bench/bench_measure.py

clean:
	rm -rf $(VENV) *.egg-info
