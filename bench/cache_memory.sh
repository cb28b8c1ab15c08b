#!/bin/bash
# A dpledgerd's resident memory against its job-cache byte cap (issue 11 defect 5): fills a
# fresh data directory with JOBS jobs of one STEPS-step update each, restarts the server with
# --max-cached-bytes=CAP, reads every job ROUNDS times and prints the resident set after each
# round with the cache's own gauges.
#   bench/cache_memory.sh build/server/dpledgerd [JOBS=1000] [STEPS=1000] [CAP=268435456]
# Server flags go in SERVER_ARGS.
set -euo pipefail
DPLEDGERD=$1
JOBS=${2:-1000}
STEPS=${3:-1000}
CAP=${4:-268435456}
ROUNDS=${ROUNDS:-2}
TOOL=${TOOL:-$(dirname "$0")/../build/bench/dpledger_cache_memory}
free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
MPORT=$(free_port)
DIR=$(mktemp -d /tmp/dpledger-cachemem-XXXXXX)
PID=
trap '[ -n "$PID" ] && kill -TERM $PID 2>/dev/null; rm -rf "$DIR"' EXIT
start() {
  # shellcheck disable=SC2086
  "$DPLEDGERD" --insecure --listen=127.0.0.1:$PORT --data-dir="$DIR/data" \
    --metrics-listen=127.0.0.1:$MPORT --log-level=warn "$@" ${SERVER_ARGS:-} \
    2>>"$DIR/log" &
  PID=$!
  for _ in $(seq 100); do
    (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$DIR/log" >&2
  return 1
}
stop() { kill -TERM $PID; wait $PID || true; PID=; }
start
"$TOOL" --server 127.0.0.1:$PORT --pid $PID --phase fill --jobs "$JOBS" --steps "$STEPS"
stop
start --max-cached-bytes="$CAP"
echo "cap_mib=$((CAP / 1048576)) start_rss_mib=$(($(awk '/VmRSS/ {print $2}' /proc/$PID/status) / 1024))"
"$TOOL" --server 127.0.0.1:$PORT --pid $PID --phase read --jobs "$JOBS" --rounds "$ROUNDS"
curl -s http://127.0.0.1:$MPORT/metrics | grep -E '^dpledger_(cached_job|pool_bytes)' || true
stop
