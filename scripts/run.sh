#!/usr/bin/env bash
# `make run`: start dubstudio on this machine with everything it needs.
#   1. As root, install the Debian packages it uses when they are missing.
#   2. Build bin/dubstudio.
#   3. Pick a database: $DATABASE_URL if set; else a PostgreSQL on 127.0.0.1:5432 that
#      lets this user in; else a private cluster under $DATA_DIR/postgres, created with
#      the system's initdb and started with pg_ctl (as an unprivileged user when root,
#      since initdb refuses to run as root). In the last two cases the database is
#      named $DUBSTUDIO_DB (default dubstudio). `dubstudio createdb` creates it when the
#      server has none of that name, or says what to do when the user may not.
#   4. Run `dubstudio serve`, which migrates, creates the first admin and the demo
#      project, and ends what it prints with a short block: the demo project's URL, the
#      admin's name and (first run only) password, how to set a new one, how to stop.
# Settings of the app itself (HTTP_ADDR, LOG_LEVEL, ...) pass through the environment;
# DUBSTUDIO_PRIVATE_PG=1 skips the shared server, PGPORT_PRIVATE (default 5439) is the
# private cluster's port.
set -euo pipefail
cd "$(dirname "$0")/.."
export DATA_DIR="${DATA_DIR:-$PWD/data}"
mkdir -p "$DATA_DIR"
db="${DUBSTUDIO_DB:-dubstudio}"

if [ "$(id -u)" = 0 ]; then
  need=()
  for cmd_pkg in ffmpeg:ffmpeg ffprobe:ffmpeg espeak-ng:espeak-ng sox:sox; do
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

echo "Building bin/dubstudio ..."
go build -o bin/dubstudio ./cmd/dubstudio

pgbin() {
  local b
  for b in /usr/lib/postgresql/*/bin/"$1"; do [ -x "$b" ] && { echo "$b"; return; }; done
  command -v "$1"
}

if [ -n "${DATABASE_URL:-}" ]; then
  ./bin/dubstudio createdb
else
  me="$(id -un)"
  shared="postgres://$me@127.0.0.1:5432/$db?sslmode=disable&connect_timeout=3"
  if [ -z "${DUBSTUDIO_PRIVATE_PG:-}" ] && DATABASE_URL="$shared" ./bin/dubstudio createdb 2>/dev/null; then
    export DATABASE_URL="$shared"
    echo "Using PostgreSQL on 127.0.0.1:5432 (database $db)."
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
    export DATABASE_URL="postgres://dubstudio@127.0.0.1:$port/$db?sslmode=disable"
    ./bin/dubstudio createdb
    echo "Using the private PostgreSQL cluster on 127.0.0.1:$port (database $db)."
  fi
fi

exec ./bin/dubstudio serve
