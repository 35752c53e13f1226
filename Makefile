# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test docs lint typecheck check bench bench-flower clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,flower]"
	touch $(STAMP)

demo: install
	$(BIN)/fedprivacy demo --out results/demo

# two pytest-xdist workers, one test file at a time each (a file's module fixtures, such as a
# Flower deployment, start once; the deployments' waiting overlaps the other worker's tests);
# one BLAS/OpenMP thread in every worker and every process a test starts (tiny models run many
# times faster on one thread on a 2-core machine; tests/conftest.py pins torch too)
TEST_WORKERS ?= 2
test: install docs
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# the documentation site (mkdocs.yml), strict: a broken link or a docstring warning fails
docs: install
	$(BIN)/mkdocs build --strict --site-dir build/site

lint: install
	$(BIN)/ruff check src tests benchmarks examples experiments
	$(BIN)/ruff format --check src tests benchmarks examples experiments

typecheck: install
	$(BIN)/mypy

check: lint typecheck test

bench: install
	$(BIN)/python benchmarks/selection.py
	$(BIN)/python benchmarks/secagg.py

# secure aggregation side by side with Flower's SecAgg+ (flwr only in .venv-bench)
bench-flower:
	test -x .venv-bench/bin/python || benchmarks/setup_bench_env.sh
	.venv-bench/bin/python benchmarks/secagg.py --grid all

clean:
	rm -rf $(VENV) results .pytest_cache .mypy_cache .ruff_cache
