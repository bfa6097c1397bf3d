# Two commands do all the set-up: `make run` and `make test`.
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000
# `make test` also runs the database's tests on PostgreSQL (pytest-django creates and drops
# test_koruweb) and the integration tests over Redis, as team mode does.
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/koruweb
KORUWEB_TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
# Two pytest-xdist workers, a test module each at a time (its module-scoped servers start once).
PYTEST_WORKERS ?= -n 2 --dist loadfile
export KORUWEB_TEST_REDIS_URL
.PHONY: run run-team test setup lint pytest clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@PY=$$(scripts/find-python) && { [ -x $(BIN)/python ] || "$$PY" -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[server,dev]'
	@rm -f $(VENV)/.installed-* && touch $@

run: $(STAMP)
	HOST=$(HOST) PORT=$(PORT) exec scripts/run-demo  # exec: make's SIGTERM reaches its trap

# Team mode on one machine: PostgreSQL, Redis, two Daphne processes behind koruweb.proxy.
run-team: $(STAMP)
	HOST=$(HOST) PORT=$(PORT) exec scripts/run-team  # exec: make's SIGTERM reaches its trap

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache  # the import rules: pyproject.toml, docs/architecture.md

pytest: $(STAMP)
	scripts/ensure-chromium  # the browser tests drive Debian's Chromium
	scripts/ensure-agents  # the real agents (npm ci of tests/agents/real, when its lockfile changed)
	@$(BIN)/python scripts/need-services '$(PG_TEST_URL)' '$(KORUWEB_TEST_REDIS_URL)'
	$(BIN)/python -m pytest $(PYTEST_WORKERS) --durations=15
	# Team mode's database: the tests where the database matters, again on PostgreSQL. Browsers,
	# real agents, runner processes and several servers run once, above (marked `once` by
	# tests/conftest.py; the team tests in tests/integration/team run on PostgreSQL and Redis of
	# their own).
	DATABASE_URL='$(PG_TEST_URL)' $(BIN)/python -m pytest $(PYTEST_WORKERS) --durations=15 -m "not once" tests

test: lint pytest

clean:
	rm -rf $(VENV) var

# The live path under load against a bare websockets server (bench/README.md). Not in `make test`.
.PHONY: bench
bench: $(STAMP)
	$(BIN)/python bench/live.py $(BENCH_ARGS)
