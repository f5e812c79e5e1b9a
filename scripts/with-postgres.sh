#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL server: initdb in a temporary directory, the
# server on 127.0.0.1 at a free port (unix socket in that directory), a database egs_test, and
# the command with EGS_TEST_POSTGRES set to its libpq connection string (role postgres, trusted;
# role egs_password must give its password, "right"). The server is stopped
# and its directory removed when the command ends, whatever its exit status (which this script
# returns). Needs Debian's postgresql (scripts/install-deps.sh installs it). As root, the server
# runs as the postgres user (PostgreSQL refuses to run as root). The server does not fsync
# (throwaway data, faster tests) unless EGS_POSTGRES_FSYNC=on (benchmarks of durable commits).
# Usage: scripts/with-postgres.sh COMMAND [ARGS...]
set -euo pipefail
if (($# == 0)); then
  echo "usage: with-postgres.sh COMMAND [ARGS...]" >&2
  exit 2
fi

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [[ -z $bin || ! -x $bin/initdb ]]; then
  echo "with-postgres: no PostgreSQL server under /usr/lib/postgresql (run scripts/install-deps.sh)" >&2
  exit 1
fi

dir=$(mktemp -d /tmp/egs-postgres.XXXXXX)
as_server=()
if [[ $(id -u) -eq 0 ]]; then
  chown postgres: "$dir"
  as_server=(runuser -u postgres --)
fi
stop() {
  "${as_server[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT

"${as_server[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync \
  >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
# Role egs_password (password "right", made below) must give its password over TCP; every other
# role is trusted. Tests of authentication failures connect as it.
"${as_server[@]}" sed -i '1i host all egs_password 127.0.0.1/32 scram-sha-256' "$dir/data/pg_hba.conf"

# A free port: the first of a few random ones that the server starts on.
started=0
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 20000))
  if "${as_server[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=${EGS_POSTGRES_FSYNC:-off}" start >/dev/null 2>&1; then
    started=1
    break
  fi
done
if ((!started)); then
  echo "with-postgres: the server did not start:" >&2
  cat "$dir/server.log" >&2
  exit 1
fi
"${as_server[@]}" "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -q \
  -c "CREATE DATABASE egs_test" -c "CREATE ROLE egs_password LOGIN PASSWORD 'right'" >/dev/null

export EGS_TEST_POSTGRES="host=127.0.0.1 port=$port user=postgres dbname=egs_test"
set +e
"$@"
status=$?
set -e
exit $status
