#!/usr/bin/env bash
# A local PostgreSQL for the distributed-tuning test (tests/tuning/test_postgres.py): several
# `pvegym tune` workers share one Optuna study through it, as they would across machines.
#
#   eval "$(bash scripts/postgres.sh)"     # install if needed, start, create role + db, export URL
#   bash scripts/postgres.sh stop          # stop the cluster again (CI: nothing may keep running)
#
# Idempotent: installs the Debian package only when no PostgreSQL is installed, starts the cluster
# only when it is down, creates the role and database only when missing (and resets the password).
# Must run as root (apt-get, pg_ctlcluster). Everything it says goes to stderr except the final
# `export PVEGYM_TEST_PG_URL=...` line on stdout, so `eval "$(...)"` works. The URL uses psycopg 3
# (`postgresql+psycopg://`), which the `dev` extra installs (`psycopg[binary]`).
set -euo pipefail

PG_USER="${PVEGYM_PG_USER:-pvegym}"
PG_DB="${PVEGYM_PG_DB:-pvegym}"
PG_PASSWORD="${PVEGYM_PG_PASSWORD:-pvegym-test}" # a throw-away local test database, not a secret
PG_PORT="${PVEGYM_PG_PORT:-5432}"

log() { echo "postgres.sh: $*" >&2; }

installed_version() {
  # the highest installed major version (Debian: /usr/lib/postgresql/<major>/bin/postgres)
  local v
  v="$(ls -1 /usr/lib/postgresql 2>/dev/null | sort -n | tail -n 1 || true)"
  if [ -n "$v" ] && [ -x "/usr/lib/postgresql/$v/bin/postgres" ]; then echo "$v"; fi
}

VERSION="$(installed_version)"

if [ "${1:-start}" = "stop" ]; then
  if [ -n "$VERSION" ] && pg_lsclusters -h 2>/dev/null | awk '{print $1, $2, $4}' \
      | grep -q "^$VERSION main online"; then
    pg_ctlcluster "$VERSION" main stop
    log "stopped PostgreSQL $VERSION"
  else
    log "PostgreSQL is not running"
  fi
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  log "must run as root (apt-get, pg_ctlcluster)"
  exit 1
fi

if [ -z "$VERSION" ]; then
  log "installing PostgreSQL (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >&2
  apt-get install -y postgresql >&2
  VERSION="$(installed_version)"
  if [ -z "$VERSION" ]; then
    log "PostgreSQL did not install"
    exit 1
  fi
fi

if ! pg_lsclusters -h | awk '{print $1, $2}' | grep -q "^$VERSION main$"; then
  log "creating cluster $VERSION/main"
  pg_createcluster "$VERSION" main >&2
fi
if ! pg_lsclusters -h | awk '{print $1, $2, $4}' | grep -q "^$VERSION main online"; then
  log "starting PostgreSQL $VERSION"
  pg_ctlcluster "$VERSION" main start >&2
fi

# wait until it accepts connections (a fresh start takes a moment)
for _ in $(seq 1 30); do
  if su postgres -c "psql -p $PG_PORT -tAc 'select 1'" >/dev/null 2>&1; then break; fi
  sleep 1
done

psql_admin() { su postgres -c "psql -p $PG_PORT -v ON_ERROR_STOP=1 -tAc \"$1\""; }

if [ "$(psql_admin "select 1 from pg_roles where rolname = '$PG_USER'")" != 1 ]; then
  log "creating role $PG_USER"
  psql_admin "create role $PG_USER login password '$PG_PASSWORD'" >/dev/null
else
  psql_admin "alter role $PG_USER login password '$PG_PASSWORD'" >/dev/null
fi
if [ "$(psql_admin "select 1 from pg_database where datname = '$PG_DB'")" != 1 ]; then
  log "creating database $PG_DB"
  psql_admin "create database $PG_DB owner $PG_USER" >/dev/null
fi

URL="postgresql+psycopg://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB"
log "PostgreSQL $VERSION ready: $URL"
echo "export PVEGYM_TEST_PG_URL='$URL'"
