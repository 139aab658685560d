# Two set-up commands: `make dev` (install, then run the whole stack) and `make test` (install, then every test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: dev test install lint unit golden clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

dev: $(STAMP)
	$(BIN)/settled dev

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest -q

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

# Re-record the golden histories (only for a deliberately incompatible change, see tests/golden).
golden: $(STAMP)
	$(BIN)/python -m tests.golden.record

clean:
	rm -rf $(VENV) .settled .pytest_cache .ruff_cache
