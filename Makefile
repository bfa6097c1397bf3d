# Two commands do all the set-up: `make run` and `make test`.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000
# `make test` also runs the search tests here; pytest-django creates and drops test_koruweb.
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/koruweb

.PHONY: run test setup lint pytest clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@PY=$$(scripts/find-python) && { [ -x $(BIN)/python ] || "$$PY" -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $@

run: $(STAMP)
	HOST=$(HOST) PORT=$(PORT) scripts/run-demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

pytest: $(STAMP)
	scripts/ensure-chromium  # the browser tests drive Debian's Chromium
	$(BIN)/python -m pytest
	@$(BIN)/python scripts/need-postgres '$(PG_TEST_URL)'
	DATABASE_URL='$(PG_TEST_URL)' $(BIN)/python -m pytest tests/test_search.py -p no:cacheprovider

test: lint pytest

clean:
	rm -rf $(VENV) var

# The live path under load against a bare websockets server (bench/README.md). Not in `make test`.
.PHONY: bench
bench: $(STAMP)
	$(BIN)/python bench/live.py $(BENCH_ARGS)
