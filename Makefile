# Two commands for a fresh machine: `make run` and `make test` (see README.md).
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
# make prod: how many Daphne servers (ports PROD_PORT, PROD_PORT+1, ...) and Celery workers.
WEB ?= 2
WORKERS ?= 2
PROD_PORT ?= 8000

.PHONY: run prod test lint format install clean docs docs-build

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Python 3.11 is required ($(PYTHON) not found)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,prod,docs]"
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) manage.py migrate --no-input
	$(PY) manage.py demo_setup --base-url http://$(HOST):$(PORT)
	@echo ""
	@echo "  FIM One hooks is starting. Portal: http://$(HOST):$(PORT)/"
	@echo "  Sign in as alice to chat, april to approve (Inbox), aude for History;"
	@echo "  admin: http://$(HOST):$(PORT)/admin/   (demo logins are listed above)"
	@echo ""
	$(PY) manage.py runserver $(HOST):$(PORT)

# The production topology on PostgreSQL + Redis: WEB Daphne servers, WORKERS Celery workers, one
# beat and one outbox relay, under honcho (Procfile), after migrate and collectstatic (the servers
# serve STATIC_ROOT). SKIP_INSTALL=1 uses an environment provisioned otherwise.
prod: $(if $(SKIP_INSTALL),,$(STAMP))
	@test -n "$$DATABASE_URL" || { echo "make prod: set DATABASE_URL (postgres://user:password@host:5432/name)"; exit 2; }
	@test -n "$$REDIS_URL" || { echo "make prod: set REDIS_URL (redis://host:6379/0)"; exit 2; }
	$(PY) manage.py migrate --no-input
	$(PY) manage.py sso_provider_from_env
	$(PY) manage.py collectstatic --no-input --verbosity 0
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/honcho start -f Procfile -p $(PROD_PORT) \
		-c web=$(WEB),worker=$(WORKERS),beat=1,relay=1

# The reference MCP server the tests drive over stdio (npm; without Node its tests skip, except
# under CI=true where a skip fails).
MCP_SERVERS := tests/mcp_servers/node_modules/.installed

$(MCP_SERVERS): tests/mcp_servers/package.json
	@if command -v npm >/dev/null 2>&1; then \
		npm install --prefix tests/mcp_servers --no-package-lock --no-audit --no-fund --silent && touch $@; \
	else echo "npm not found: the tests against the reference MCP server will skip"; fi

test: $(STAMP) $(MCP_SERVERS)
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache  # the contracts read every import; a cache can outlive an edit

# The documentation (docs/, mkdocs.yml): served on http://$(HOST):8001/ while you edit it, or
# built into site/, where any warning (a broken link or anchor) fails the build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve -a $(HOST):8001

docs-build: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) db.sqlite3 .pytest_cache
