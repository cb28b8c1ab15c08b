#!/usr/bin/env bash
# The main job. Until the server lands, the offline CLI accounts a worked DP-SGD
# example: 10,000 steps of sigma=1.0 at q=0.001, epsilon at delta=1e-9.
set -euo pipefail
BUILD_DIR=${1:-build}
"$BUILD_DIR/client/dpledger" account --accountant pld --delta 1e-9 \
  --step subsampled_gaussian:sigma=1.0,q=0.001,count=10000
