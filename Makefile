# Two set-up commands: `make dev` (install, then run the whole stack) and `make test` (install, then every test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test install lint unit golden clean browser screenshots

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,openai-agents,pipecat,livekit]'
	touch $(STAMP)

install: $(STAMP)

dev: $(STAMP)
	$(BIN)/settled dev

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The page tests drive Debian's Chromium through Playwright (never `playwright install`).
browser:
	@test -x /usr/bin/chromium || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq chromium; } \
	  || echo "no /usr/bin/chromium: the browser tests in tests/page will be skipped (apt-get install chromium)"

test: lint browser
	$(BIN)/python -m pytest -q

screenshots: $(STAMP) browser
	SETTLED_UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/page

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

# Re-record the golden histories (only for a deliberately incompatible change, see tests/golden).
golden: $(STAMP)
	$(BIN)/python -m tests.golden.record

clean:
	rm -rf $(VENV) .settled .pytest_cache .ruff_cache
