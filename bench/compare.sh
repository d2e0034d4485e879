#!/usr/bin/env bash
# Side by side: the issue-7 workload (20,000 no-op jobs, producer pipelining
# 100, 4 worker connections acknowledging one job at a time) against
# beanstalkd (in memory, and with a binlog fsynced on every write) and
# gearmand (in memory), then `taskyard bench` (durable, synchronous=FULL),
# in the same run on the same machine. Prints median drain rates of RUNS
# runs and taskyard's ratio to each.
#
# With POSTGRES=1 (the default when Debian's PostgreSQL server is
# installed), also starts a throwaway PostgreSQL cluster (as `nobody` when
# run as root; fsync and synchronous_commit on) and runs graphile-worker
# (npm, with its documented batching settings, 32 concurrent jobs) from a
# backlog and with jobs arriving live, and `taskyard bench --store postgres`
# on the same cluster in both modes, its workers prefetching 256 attempts
# each (graphile-worker's local queue holds 500) and its batches split
# between 3 write connections.
#
#   bench/compare.sh            # RUNS=3 JOBS=20000 by default
#   RUNS=1 JOBS=5000 bench/compare.sh
#   POSTGRES=0 bench/compare.sh # without PostgreSQL
set -euo pipefail

RUNS=${RUNS:-3}
JOBS=${JOBS:-20000}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
TASKYARD=${TASKYARD:-$ROOT/target/release/taskyard}
WORK=$(mktemp -d)
PIDS=()

PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
POSTGRES=${POSTGRES:-$([ -n "$PGBIN" ] && echo 1 || echo 0)}
PGDATA_DIR=""

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ -n "$PGDATA_DIR" ]; then as_pg "$PGBIN/pg_ctl" -D "$PGDATA_DIR" -m immediate stop >/dev/null 2>&1 || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

install_if_missing() {
    if ! command -v beanstalkd >/dev/null \
        || ! { command -v gearmand >/dev/null || [ -x /usr/sbin/gearmand ]; }; then
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y beanstalkd gearman-job-server
    fi
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_for_port() {
    for _ in $(seq 100); do
        if python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null; then
            return 0
        fi
        sleep 0.05
    done
    echo "server on port $1 did not start" >&2
    return 1
}

# Every measurement starts from the same disk state: the previous one's
# writes (binlog, WAL, deleted temp files) flushed, so no server pays for
# another's writeback in its fsyncs.
settle() {
    sync
    sleep 0.5
}

# run_server NAME LOADGEN-KIND COMMAND...: starts the server with PORT
# substituted, runs the load generator, stops the server by its PID.
run_server() {
    local name=$1 kind=$2; shift 2
    settle
    local port; port=$(free_port)
    local cmd=("${@//PORT/$port}")
    "${cmd[@]}" >"$WORK/$name.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    wait_for_port "$port"
    python3 "$HERE/loadgen.py" "$kind" "127.0.0.1:$port" --jobs "$JOBS" >>"$WORK/$name.jsonl"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

run_taskyard() {
    local name=$1; shift
    settle
    "$TASKYARD" bench --jobs "$JOBS" --latency-jobs 0 --json "$@" \
        | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["throughput"]))' \
        >>"$WORK/$name.jsonl"
}

# PostgreSQL refuses to run as root: run its programs as `nobody` then.
as_pg() {
    if [ "$(id -u)" = 0 ]; then setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; else "$@"; fi
}

# Starts a throwaway cluster in $WORK/pg on a free port; sets PGURL.
start_postgres() {
    local dir=$WORK/pg port
    mkdir -p "$dir"
    echo bench >"$dir/pw"
    [ "$(id -u)" = 0 ] && chown -R 65534:65534 "$dir" && chmod 755 "$WORK"
    as_pg "$PGBIN/initdb" -D "$dir/data" -U taskyard --pwfile="$dir/pw" --auth=scram-sha-256 \
        --no-sync -E UTF8 >"$dir/initdb.log"
    port=$(free_port)
    as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=100" start >/dev/null
    PGDATA_DIR=$dir/data
    for db in graphile taskyard; do
        PGPASSWORD=bench "$PGBIN/createdb" -h 127.0.0.1 -p "$port" -U taskyard "$db"
    done
    PGURL_BASE="postgres://taskyard:bench@127.0.0.1:$port"
}

# graphile-worker from npm, installed once under target/.
install_graphile() {
    local dir=$ROOT/target/bench-node
    if [ ! -d "$dir/node_modules/graphile-worker" ]; then
        command -v npm >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm; }
        mkdir -p "$dir"
        (cd "$dir" && npm init -y >/dev/null && npm install --no-audit --no-fund graphile-worker@0.18 pg >/dev/null)
    fi
    cp "$HERE/graphile.mjs" "$dir/graphile.mjs"
    GRAPHILE=$dir/graphile.mjs
}

run_graphile() {
    local mode=$1
    settle
    node "$GRAPHILE" "$PGURL_BASE/graphile" "$JOBS" "$mode" >>"$WORK/graphile-$mode.jsonl"
}

install_if_missing
if [ "$POSTGRES" = 1 ]; then
    start_postgres
    install_graphile
fi
GEARMAND=$(command -v gearmand || echo /usr/sbin/gearmand)
[ -x "$TASKYARD" ] || (cd "$ROOT" && cargo build --release --bin taskyard)

for run in $(seq "$RUNS"); do
    echo "run $run of $RUNS" >&2
    rm -rf "$WORK/binlog"; mkdir -p "$WORK/binlog"
    run_server beanstalkd-memory beanstalkd beanstalkd -l 127.0.0.1 -p PORT
    run_server beanstalkd-fsync beanstalkd beanstalkd -l 127.0.0.1 -p PORT -b "$WORK/binlog" -f 0
    run_server gearmand-memory gearmand "$GEARMAND" --listen=127.0.0.1 --port=PORT --log-file=none
    run_taskyard taskyard-full
    run_taskyard taskyard-full-batch1 --batch 1
    if [ "$POSTGRES" = 1 ]; then
        run_graphile backlog
        run_graphile live
        run_taskyard taskyard-postgres-backlog --store postgres --postgres-url "$PGURL_BASE/taskyard" \
            --prefetch 256 --write-connections 3 --backlog
        run_taskyard taskyard-postgres --store postgres --postgres-url "$PGURL_BASE/taskyard" \
            --prefetch 256 --write-connections 3
    fi
done

python3 - "$WORK" "$POSTGRES" <<'PY'
import json, statistics, sys, os
work, postgres = sys.argv[1], sys.argv[2] == "1"
def rates(name):
    return [json.loads(l)["drain_jobs_per_sec"] for l in open(os.path.join(work, name + ".jsonl"))]
def median(name):
    rows = rates(name)
    return statistics.median(rows), len(rows)
def runs(name):
    return " / ".join("%.0f" % r for r in rates(name))
servers = [
    ("gearmand-memory", "gearmand 1.1, in memory", "none"),
    ("beanstalkd-memory", "beanstalkd 1.12, in memory", "none"),
    ("beanstalkd-fsync", "beanstalkd 1.12, -b DIR -f 0", "every write fsynced"),
    ("taskyard-full", "taskyard, synchronous=FULL, batch 100", "every answer after its commit"),
    ("taskyard-full-batch1", "taskyard, synchronous=FULL, --batch 1", "every answer after its commit"),
]
ty, _ = median("taskyard-full")
ty1, _ = median("taskyard-full-batch1")
print("| server | durability | drain jobs/s (median of %d) | taskyard batch 100 ÷ this | taskyard batch 1 ÷ this |" % median("taskyard-full")[1])
print("|---|---|---:|---:|---:|")
for name, label, durability in servers:
    rate, _ = median(name)
    print("| %s | %s | %.0f | %.2f× | %.2f× |" % (label, durability, rate, ty / rate, ty1 / rate))
if postgres:
    print()
    print("| on one PostgreSQL (synchronous_commit on) | drain jobs/s (median of %d) | each run | taskyard ÷ graphile-worker |" % median("taskyard-postgres")[1])
    print("|---|---:|---:|---:|")
    for mode, label in [("backlog", "from a backlog"), ("live", "jobs arriving live")]:
        name = "taskyard-postgres" + ("-backlog" if mode == "backlog" else "")
        ours, theirs = median(name)[0], median("graphile-" + mode)[0]
        print("| graphile-worker 0.18, %s | %.0f | %s | |" % (label, theirs, runs("graphile-" + mode)))
        print("| taskyard --store postgres --prefetch 256 --write-connections 3, %s | %.0f | %s | **%.2f×** |" % (label, ours, runs(name), ours / theirs))
PY
