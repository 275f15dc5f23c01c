#!/usr/bin/env bash
# `make run`: start dubstudio on this machine with everything it needs.
#   1. As root, install the Debian packages it uses when they are missing.
#   2. Pick a database: $DATABASE_URL if set; else a PostgreSQL on 127.0.0.1:5432 that
#      lets this user in; else a private cluster under $DATA_DIR/postgres, created with
#      the system's initdb and started with pg_ctl (as an unprivileged user when root,
#      since initdb refuses to run as root).
#   3. Build and run `dubstudio serve`, which migrates, creates the first admin (its
#      password is printed once) and the demo project, and prints the URL.
set -euo pipefail
cd "$(dirname "$0")/.."
export DATA_DIR="${DATA_DIR:-$PWD/data}"
mkdir -p "$DATA_DIR"

if [ "$(id -u)" = 0 ]; then
  need=()
  for cmd_pkg in ffmpeg:ffmpeg ffprobe:ffmpeg espeak-ng:espeak-ng sox:sox psql:postgresql-client; do
    command -v "${cmd_pkg%%:*}" >/dev/null || need+=("${cmd_pkg#*:}")
  done
  if [ -z "${DATABASE_URL:-}" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
    need+=(postgresql)
  fi
  if [ ${#need[@]} -gt 0 ]; then
    echo "Installing ${need[*]} ..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi

pgbin() {
  local b
  for b in /usr/lib/postgresql/*/bin/"$1"; do [ -x "$b" ] && { echo "$b"; return; }; done
  command -v "$1"
}

if [ -z "${DATABASE_URL:-}" ]; then
  me="$(id -un)"
  # DUBSTUDIO_PRIVATE_PG=1 skips the shared server and uses the private cluster.
  if [ -z "${DUBSTUDIO_PRIVATE_PG:-}" ] &&
    psql "postgres://$me@127.0.0.1:5432/postgres?sslmode=disable&connect_timeout=3" -tAc 'select 1' >/dev/null 2>&1; then
    psql "postgres://$me@127.0.0.1:5432/postgres?sslmode=disable" -tAc "select 1 from pg_database where datname='dubstudio'" | grep -q 1 ||
      psql "postgres://$me@127.0.0.1:5432/postgres?sslmode=disable" -qc 'create database dubstudio'
    export DATABASE_URL="postgres://$me@127.0.0.1:5432/dubstudio?sslmode=disable"
    echo "Using PostgreSQL on 127.0.0.1:5432 (database dubstudio)."
  else
    pgdata="$DATA_DIR/postgres"
    port="${PGPORT_PRIVATE:-5439}"
    runas=()
    owner="$me"
    if [ "$(id -u)" = 0 ]; then
      owner=dubstudio
      id -u "$owner" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$owner"
      runas=(runuser -u "$owner" --)
    fi
    if [ ! -f "$pgdata/PG_VERSION" ]; then
      echo "Creating a private PostgreSQL cluster in $pgdata ..."
      mkdir -p "$pgdata" && chown "$owner" "$pgdata" && chmod 700 "$pgdata"
      "${runas[@]}" "$(pgbin initdb)" -D "$pgdata" -U dubstudio --auth=trust -E UTF8 >/dev/null
    fi
    if ! "${runas[@]}" "$(pgbin pg_ctl)" -D "$pgdata" status >/dev/null 2>&1; then
      "${runas[@]}" "$(pgbin pg_ctl)" -D "$pgdata" -l "$pgdata/server.log" -w \
        -o "-p $port -k $pgdata -c listen_addresses=127.0.0.1" start >/dev/null
    fi
    psql "postgres://dubstudio@127.0.0.1:$port/postgres?sslmode=disable" -tAc "select 1 from pg_database where datname='dubstudio'" | grep -q 1 ||
      psql "postgres://dubstudio@127.0.0.1:$port/postgres?sslmode=disable" -qc 'create database dubstudio'
    export DATABASE_URL="postgres://dubstudio@127.0.0.1:$port/dubstudio?sslmode=disable"
    echo "Using the private PostgreSQL cluster on 127.0.0.1:$port."
  fi
fi

go build -o bin/dubstudio ./cmd/dubstudio
exec ./bin/dubstudio serve
