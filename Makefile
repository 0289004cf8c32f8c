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

.PHONY: install demo test test-avx2 test-slow bench docs clean
install: $(STAMP)

# The demo is one table: random search in the default tiles space (the learning agents' space) beside
# random-structured in the microkernel space (calibrated register microkernels, the space that reaches the vendor
# on fp32 conv2d and matmul), the vendors timed and everything re-timed in the same run. About a minute on 2 cores;
# a machine's first use adds a quick microkernel calibration (about 10 s, announced). Re-running resumes.
demo: $(STAMP)
	@echo "Conv2d-ResNet-R5-v0 (ResNet-50 R5, 3x3 conv2d): the tiles space (agent random) beside the microkernel space (agent random-structured)"
	$(BIN)/tensorgym compare Conv2d-ResNet-R5-v0 --agents random,random-structured --budget $(BUDGET) --seeds 1 \
		--db tensorgym.db --out compare-results/demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

# The fast suite again with this CPU acting as an AVX2 + FMA one (x86-64-v3): kernels compiled for AVX2,
# vendors restricted the same way, so the AVX2 path is tested whatever CPU runs it (CI runs both). The docs'
# snippets run on landscapes and build no kernel, so they read the same on any target and run once, in `make test`.
test-avx2: $(STAMP)
	TENSORGYM_CPU=x86-64-v3 $(BIN)/python -m pytest -q -m "not slow and not docs"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# The documentation site (Sphinx, furo, MyST; the docs extra, which the test extra includes): docs/_build/html.
docs: $(STAMP)
	$(BIN)/sphinx-build -W -b html docs docs/_build/html

bench: $(STAMP)
	$(BIN)/python bench/bench_measure.py

clean:
	rm -rf $(VENV) *.egg-info
