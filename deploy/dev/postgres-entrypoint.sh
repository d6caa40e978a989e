#!/bin/bash
# Entrypoint of the local stand-in for docker.io/library/postgres:15-bookworm
# (deploy/dev/base-images.sh). It honours the official image's variables that LychD's units and
# test kit use: PGDATA, POSTGRES_PASSWORD / POSTGRES_PASSWORD_FILE, POSTGRES_INITDB_ARGS and
# POSTGRES_HOST_AUTH_METHOD; an empty PGDATA is initialised (superuser `postgres`), remote
# connections are allowed with that method (scram-sha-256 by default), then `postgres` runs
# in the foreground. Started as root it drops to postgres (uid 999).
set -euo pipefail

if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
[ "${1:-postgres}" = postgres ] || exec "$@"
shift || true

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA"; chmod 0700 "$PGDATA"
  password=${POSTGRES_PASSWORD:-}
  if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then password=$(<"$POSTGRES_PASSWORD_FILE"); fi
  auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
  if [ -z "$password" ] && [ "$auth" != trust ]; then
    echo "postgres-entrypoint: no superuser password (POSTGRES_PASSWORD[_FILE]) and POSTGRES_HOST_AUTH_METHOD is not trust" >&2
    exit 1
  fi
  pwfile=$(mktemp /tmp/pw.XXXXXX)
  printf '%s\n' "${password:-unused}" >"$pwfile"
  # shellcheck disable=SC2086
  initdb --username=postgres --pwfile="$pwfile" ${POSTGRES_INITDB_ARGS:-} >/dev/null
  rm -f "$pwfile"
  printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"
  printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.auto.conf"
  echo "postgres-entrypoint: initialised $PGDATA"
fi
exec postgres "$@"
