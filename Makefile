# Two set-up commands: `make dev` (install, then run the whole stack) and `make test` (install, then every test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test install typescript lint layers unit golden clean browser nginx prometheus screenshots compose-check bench lock

# The exact set the tests run on is uv.lock (pyproject.toml declares ranges): uv from PyPI installs it,
# every extra together in one resolution, and refuses a lock that no longer satisfies the ranges
# (`uv lock` makes a new one). --inexact keeps pip, which the tests' fresh venvs and `layers` use.
UV_VERSION := 0.13.9
$(STAMP): pyproject.toml uv.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip 'uv==$(UV_VERSION)'
	UV_PROJECT_ENVIRONMENT=$(VENV) $(BIN)/uv sync --quiet --locked --inexact --all-extras
	touch $(STAMP)

# A new lock after a change of the ranges, or to move the tested set to the newest releases
# (`make lock LOCK_ARGS=--upgrade`); tests/installs checks the lock against the ranges.
# The image's pins (Dockerfile): the server extra as the lock holds it, with hashes; tests/installs
# checks that the file is the lock's export.
SERVER_PINS := deploy/requirements-server.txt
lock:
	@test -x $(BIN)/uv || { $(PYTHON) -m venv $(VENV) && $(BIN)/pip install --quiet 'uv==$(UV_VERSION)'; }
	$(BIN)/uv lock $(LOCK_ARGS)
	$(BIN)/uv export --quiet --frozen --no-dev --extra server --no-emit-project --output-file $(SERVER_PINS)

# The TypeScript package (typescript/, docs/typescript.md): Node.js from Debian when missing (we are root),
# its modules from the lockfile (npm ci, skipped while up to date), then its build (dist/ and the tests).
TS := typescript
TS_MODULES := $(TS)/node_modules/.installed
TS_BUILT := $(TS)/build/.built
$(TS_MODULES): $(TS)/package.json $(TS)/package-lock.json
	@command -v npm >/dev/null || [ "$$(id -u)" != 0 ] \
	  || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	cd $(TS) && npm ci --no-audit --no-fund --loglevel=error
	touch $(TS_MODULES)

$(TS_BUILT): $(TS_MODULES) $(TS)/tsconfig.json $(TS)/tsconfig.test.json $(wildcard $(TS)/src/*.ts $(TS)/src/*/*.ts $(TS)/test/*.ts $(TS)/examples/*.ts)
	cd $(TS) && npm run --silent build
	touch $(TS_BUILT)

typescript: $(TS_BUILT)

install: $(STAMP) $(TS_BUILT)

dev: $(STAMP)
	$(BIN)/settled dev

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The page tests drive Debian's Chromium through Playwright (never `playwright install`).
browser:
	@test -x /usr/bin/chromium || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium; } \
	  || echo "no /usr/bin/chromium: the browser tests in tests/page will be skipped (apt-get install chromium)"

# The secured-Temporal tests (tests/reach) put Debian's nginx, a TLS-terminating gRPC proxy, in front
# of the dev server: installed with apt when missing and we are root.
nginx:
	@command -v nginx >/dev/null || test -x /usr/sbin/nginx || { [ "$$(id -u)" = 0 ] && apt-get update -qq \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; } \
	  || echo "no nginx: the secured-Temporal tests in tests/reach will fail (apt-get install nginx)"

# The on-call tests (tests/oncall) run Debian's promtool on the rules and a real Prometheus scraping a
# stack: installed with apt when missing and we are root.
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; } \
	  || echo "no prometheus: the on-call tests in tests/oncall will fail (apt-get install prometheus)"

# docker-compose.yml against the compose schema, offline (no Docker engine, no image pulled): Debian's
# docker-compose, installed with apt when missing and we are root; also the v2 plugin where it exists.
# Dummy values stand in for the secrets the file requires.
COMPOSE_CHECK_ENV := POSTGRES_PASSWORD=compose-check SETTLED_API_KEYS=ci:compose-check \
  SETTLED_CONFIG=./settled/sandbox_kinds.toml
compose-check:
	@command -v docker-compose >/dev/null || [ "$$(id -u)" != 0 ] \
	  || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null; }
	@if command -v docker-compose >/dev/null; then \
	  $(COMPOSE_CHECK_ENV) docker-compose -f docker-compose.yml config -q \
	  && echo "docker-compose.yml is valid (docker-compose $$(docker-compose version --short))"; \
	else echo "no docker-compose: docker-compose.yml not checked against the schema (apt-get install docker-compose)"; fi
	@if docker compose version >/dev/null 2>&1; then \
	  $(COMPOSE_CHECK_ENV) docker compose -f docker-compose.yml config -q \
	  && echo "docker-compose.yml is valid (docker compose $$(docker compose version --short))"; fi

# The import layers (docs/architecture.md) on the package as it installs: the editable install maps
# folders onto names, which import-linter cannot walk, so it reads a plain build of the package.
LAYERS_DIR := $(VENV)/layers
layers: $(STAMP)
	rm -rf $(LAYERS_DIR)
	$(BIN)/pip install --quiet --no-deps --target $(LAYERS_DIR) . 2>/dev/null
	cd $(LAYERS_DIR) && PYTHONPATH=. $(CURDIR)/$(BIN)/lint-imports --config $(CURDIR)/pyproject.toml

# The test folders run in a few groups side by side, each a pytest of its own with its own stack
# (tests/run.py; a new folder joins its default group); it fails when any group fails.
test: lint layers browser nginx prometheus compose-check typescript
	$(BIN)/python -m tests.run

screenshots: $(STAMP) browser
	SETTLED_UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/page

# The benchmark (docs/performance.md): a stack of its own, a few minutes; results in bench-results/.
# make test runs only its tiny setting (tests/bench), to prove it works.
bench: $(STAMP)
	$(BIN)/settled bench

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

# Re-record the golden histories (only for a deliberately incompatible change, see tests/golden).
golden: $(STAMP)
	$(BIN)/python -m tests.golden.record

clean:
	rm -rf $(VENV) .settled .pytest_cache .ruff_cache
