#!/usr/bin/env bash
# Scale-out on loopback (SPEC O3): N Daphne processes + a django-tasks-db worker, on
# PostgreSQL + Redis, configured by environment variables only. Ctrl+C stops everything.
#   DATABASE_URL   postgres://postgres@127.0.0.1:5432/previously   (created if missing)
#   REDIS_URL      redis://127.0.0.1:6379/0
#   PREVIOUSLY_PROCESSES  number of Daphne processes (default 2)
# Any other setting (PREVIOUSLY_LLM_BASE_URL, DJANGO_SECRET_KEY, …) is passed through.
set -euo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/previously}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
db="${DATABASE_URL##*/}"; db="${db%%\?*}"
psql "${DATABASE_URL%/*}/postgres" -tAc "SELECT 1 FROM pg_database WHERE datname='$db'" | grep -q 1 \
  || psql "${DATABASE_URL%/*}/postgres" -c "CREATE DATABASE \"$db\"" >/dev/null
exec .venv/bin/python -m bench.stack --processes "${PREVIOUSLY_PROCESSES:-2}"
