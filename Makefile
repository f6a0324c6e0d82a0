# The README's two set-up commands are `make run` and `make test`; both install first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8000

.PHONY: install run test bench lint migrate clean scale loadtest faults

# Find a Python >= 3.12: python3.13/python3.12 on PATH, then pyenv's versions.
define find_python
for p in python3.13 python3.12 $$(ls -d $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV) python3; do \
  if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; then \
    command -v $$p; exit 0; fi; \
done; exit 1
endef

$(PY):
	@py=$$( $(find_python) ) || { echo "error: Python >= 3.12 not found (tried python3.13, python3.12, ~/.pyenv/versions/3.12+, python3). Install one, e.g. 'pyenv install 3.12'." >&2; exit 1; }; \
	echo "Creating $(VENV) with $$py"; $$py -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# The compiled catalogues are generated files (git-ignored), made from the committed .po by
# Babel's compiler; Django's `compilemessages` (GNU gettext) writes the same files.
MO := $(patsubst %.po,%.mo,$(wildcard locale/*/LC_MESSAGES/django.po))
locale/%/LC_MESSAGES/django.mo: locale/%/LC_MESSAGES/django.po $(STAMP)
	$(VENV)/bin/pybabel compile --statistics -l $* -i $< -o $@

install: $(STAMP) $(MO)

migrate: install
	$(PY) manage.py migrate --noinput

run: migrate
	@$(PY) manage.py ensure_account
	@echo ""
	@echo "Previously is running at http://127.0.0.1:$(PORT)/  (admin: http://127.0.0.1:$(PORT)/admin/)"
	@echo "Log in with the account above. Ctrl+C stops the server."
	$(VENV)/bin/daphne -b 127.0.0.1 -p $(PORT) previously.asgi:application

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

$(VENV)/.bench-installed: pyproject.toml $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	@touch $@

# Benchmarks (BENCH.md): scratch SQLite DB, results in bench/results/ (SUMMARY.md, *.json, *.png).
bench: $(VENV)/.bench-installed
	$(PY) -m bench $(BENCH_ARGS)

# Scale-out on loopback (SPEC O3): N Daphne + a django-tasks-db worker on PostgreSQL + Redis.
scale: install
	scripts/scale_out.sh

# BENCH.md §4: 200 websocket chats paced like people, 1 process and 2 processes + Redis +
# PostgreSQL, with and without evolutions; bench/results/loadtest.json.
# LOADTEST_ARGS="--n 50" for a quick run, "--think 0 --ramp 0" for a burst (capacity).
loadtest: install
	$(PY) -m bench.loadtest $(LOADTEST_ARGS)

# Issue 9's fault and cross-process tests: model death mid-stream, worker death mid-evolution,
# SQLite busy, Redis restart, two processes + worker (needs PostgreSQL + Redis on loopback).
faults: install
	$(PY) -m pytest -q tests/previously/agent/test_faults.py tests/previously/chat/test_resync.py \
	  tests/previously/test_scale_out.py "tests/previously/chat/test_consumer.py::test_a_model_dying_mid_stream_archives_the_partial_as_failed_and_retry_works_l3"

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) var/test-* $(MO)
