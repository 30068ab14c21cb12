# The two commands of the README: `make run` and `make test`. Both set up what they need first.
PY := .venv/bin/python

.PHONY: setup run test check format demo conformance bench

# The engine alone, no server: trains a tiny MLP and prints its backward graph.
demo: setup
	$(PY) -m app.demo

setup:
	bash scripts/setup.sh

run: setup
	$(PY) -m app

# Every test, plus lint, format and type checks. The torch oracle is installed first: the
# differential tests compare the engine against real PyTorch 2.8.0, and the torch backend's tests
# also run it under torch 2.13.0 (a venv of its own; scripts/setup.sh --oracle makes both).
test:
	bash scripts/setup.sh --oracle --browser
	status=0; \
	$(PY) -m pytest -q -n 2 -p no:cacheprovider || status=$$?; \
	$(MAKE) --no-print-directory check || status=1; \
	exit $$status

# PyTorch's own autograd and checkpoint tests, run on torch and on the engine (a few minutes; not
# part of `make test`): prints "N/M PyTorch tests pass on the engine", writes tests/conformance/report.md.
conformance:
	bash scripts/setup.sh --oracle
	$(PY) scripts/conformance.py --budget 600

# Every performance figure beside its target (a few minutes; not part of `make test`): writes
# bench/results.json and prints the table of docs/performance.md.
bench:
	bash scripts/setup.sh --oracle --browser
	$(PY) bench/run_all.py

check:
	$(PY) -m ruff check engine app tests scripts
	$(PY) -m ruff format --check engine app tests scripts
	$(PY) -m mypy

format:
	$(PY) -m ruff format engine app tests scripts
	$(PY) -m ruff check --fix engine app tests scripts
