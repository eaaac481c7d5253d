# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-test

.PHONY: run test lint types unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

EXAMPLES := $(CURDIR)/examples/skills

# Until the server lands, the main job lists the bundled examples and runs one end to end.
run: $(STAMP)
	ONGRID_SKILLS_EXTERNAL_DIRS=$(EXAMPLES) $(BIN)/ongrid-skills list
	ONGRID_SKILLS_EXTERNAL_DIRS=$(EXAMPLES) $(BIN)/ongrid-skills run host_info '{}'
	ONGRID_SKILLS_EXTERNAL_DIRS=$(EXAMPLES) $(BIN)/ongrid-skills run disk_cleaner \
		'{"path": "$(CURDIR)/examples", "dry_run": true}' --yes

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

types: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest

test: lint types unit

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
