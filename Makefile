# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# What running needs (`make run`), then the test tools on top of it (`make test`, the others).
RUNTIME := $(VENV)/.installed-run
STAMP   := $(VENV)/.installed-test

.PHONY: run test lint types unit bench clean

$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	$(BIN)/python -c 'from ongrid_skills.execution.spawner import main; raise SystemExit(main())'
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

EXAMPLES := $(CURDIR)/examples/skills
PERSONAS := $(CURDIR)/examples/personas
# The demo marketplace: the example pack's index, and the TEST key that signs it (its private
# half is in the repository, so nothing it signs is worth trusting outside a demo). Set either
# variable, even empty (`ONGRID_TRUSTED_PACK_KEYS= make run`), and it is not used.
PACK_KEY   := $(CURDIR)/examples/packs/TEST-KEY-DO-NOT-USE.pub
PACK_INDEX := $(CURDIR)/examples/packs/index.json

# The main job: the server on the bundled examples (skills and personas), with the embedded
# SQLite store in .ongrid/. The first start prints an admin token once. Each default gives way
# to the variable when it is set.
run: $(RUNTIME)
	@[ -n "$${ONGRID_TRUSTED_PACK_KEYS+set}" ] || echo "make run: trusting the example pack's TEST key \
	($(PACK_KEY)) and its index: a demo only. To trust no key: ONGRID_TRUSTED_PACK_KEYS= make run" >&2
	ONGRID_TRUSTED_PACK_KEYS=$${ONGRID_TRUSTED_PACK_KEYS-$(PACK_KEY)} \
	ONGRID_PACK_INDEXES=$${ONGRID_PACK_INDEXES-$(PACK_INDEX)} \
	ONGRID_SKILLS_EXTERNAL_DIRS=$${ONGRID_SKILLS_EXTERNAL_DIRS:-$(EXAMPLES)} \
	ONGRID_PERSONAS_DIRS=$${ONGRID_PERSONAS_DIRS:-$(PERSONAS)} \
		$(BIN)/ongrid-skills serve --watch

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

types: $(STAMP)
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest

test: lint types unit

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
