# Two entry points a new user needs: `make demo` (the main job, on the bundled snapshot) and `make test`.
# Both create .venv in the checkout and install everything into it first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test test-fast install bench figures clean

$(BIN)/retriage: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch pinned first: 2.13.0 is a CPU build; an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	# byte-compile our sources once: a fresh `retriage classify` then starts without compiling them
	$(BIN)/python -m compileall -q retriage db miner taxonomy classifier triage report > /dev/null
	touch $(BIN)/retriage

install: $(BIN)/retriage

demo: install
	$(BIN)/retriage demo

test: install
	# two workers, each test file on one of them (module fixtures are built once per file)
	$(BIN)/pytest -q -n 2 --dist loadfile

test-fast: install
	$(BIN)/pytest -q -n 2 --dist loadfile -m "not slow"

bench: install
	$(BIN)/python bench/label --limit 400
	$(BIN)/python bench/classify
	$(BIN)/python bench/traces
	$(BIN)/python bench/report
	$(BIN)/python bench/generalisation
	$(BIN)/python bench/newest
	$(BIN)/python bench/newset
	$(BIN)/python bench/eval
	$(BIN)/python bench/duplicates
	sh bench/mine
	sh bench/concurrency --db retriage.duckdb  # needs the demo database (`make demo`)

figures: install
	# docs/evaluation.md: every split `retriage eval` scores, written by the command itself (a few minutes cold)
	$(BIN)/retriage eval --markdown docs/evaluation.md

clean:
	rm -rf $(VENV) retriage.duckdb retriage.duckdb.wal
