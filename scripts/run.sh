#!/usr/bin/env bash
# The main job (`make run`): start dpledgerd on localhost with its SQLite store under ./var.
#   gRPC      127.0.0.1:50051 (plaintext, no auth: --insecure is for local use only)
#   metrics   http://127.0.0.1:9464/metrics
# Stop with Ctrl-C (SIGINT): the server drains its streams and flushes the store.
# Try it:  dpledger --server 127.0.0.1:50051 job create --job demo --epsilon 8 --delta 1e-9
# Settings can also come from the environment (DPLEDGER_<FLAG>, e.g. DPLEDGER_LOG_LEVEL=debug).
set -euo pipefail
BUILD_DIR=${1:-build}
mkdir -p var
exec "$BUILD_DIR/server/dpledgerd" --listen 127.0.0.1:50051 --data-dir var \
  --metrics-listen 127.0.0.1:9464 --insecure
