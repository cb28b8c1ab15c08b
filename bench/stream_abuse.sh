#!/bin/bash
# Runs one dpledger_stream_abuse scenario against a fresh dpledgerd on a free loopback port,
# then times its SIGTERM shutdown (issue 11). Compare two builds by running it with each.
#   bench/stream_abuse.sh build/server/dpledgerd --scenario noread --streams 100 --seconds 15
# Server flags go in SERVER_ARGS, e.g. SERVER_ARGS="--stream-stall-timeout-ms=5000".
set -euo pipefail
DPLEDGERD=$1; shift
TOOL=${TOOL:-$(dirname "$0")/../build/bench/dpledger_stream_abuse}
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
DIR=$(mktemp -d /tmp/dpledger-abuse-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
# shellcheck disable=SC2086
"$DPLEDGERD" --insecure --listen=127.0.0.1:$PORT --data-dir="$DIR/data" --metrics-listen= \
  --log-level=warn ${SERVER_ARGS:-} 2>"$DIR/log" &
PID=$!
for _ in $(seq 100); do
  (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
  sleep 0.1
done
timeout 300 "$TOOL" --server 127.0.0.1:$PORT --pid $PID "$@"
START=$(date +%s.%N)
kill -TERM $PID
wait $PID || true
echo "shutdown_seconds=$(/usr/bin/python3 -c "print(round($(date +%s.%N) - $START, 3))")"
