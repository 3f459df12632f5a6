#!/usr/bin/env bash
# Start PostgreSQL on loopback for tests/grading/test_gradebook_postgres.py and make a
# role `tinylm` (password `tinylm`) that may create databases. Idempotent.
# Called by .ci/run; when it fails, that test skips with the reason.
set -euo pipefail

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
fi
version=$(ls /usr/lib/postgresql | sort -V | tail -1)
if ! pg_lsclusters -h | awk '{print $1" "$2}' | grep -qx "$version main"; then
    pg_createcluster "$version" main >/dev/null
fi
pg_ctlcluster "$version" main start 2>/dev/null || true   # "already running" is fine
for _ in $(seq 30); do
    pg_isready -q -h 127.0.0.1 -p 5432 && break
    sleep 1
done
pg_isready -h 127.0.0.1 -p 5432
su postgres -c "psql -q -v ON_ERROR_STOP=1" <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tinylm') THEN
    CREATE ROLE tinylm LOGIN PASSWORD 'tinylm' CREATEDB;
  END IF;
END $$;
SQL
echo "PostgreSQL $version on 127.0.0.1:5432, role tinylm"
