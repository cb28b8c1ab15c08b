#!/usr/bin/env bash
# The long crash soak (issue 16): dpledger_crash_soak on SQLite and on PostgreSQL (a throwaway
# server on 127.0.0.1), KILLS SIGKILLs each, seeded. Prints one JSON line per store; exits
# non-zero when any invariant failed. Build first (make build).
#   scripts/crash_soak.sh [KILLS=60] [SEED=16] [CLIENTS=4]
set -euo pipefail
kills=${1:-60}
seed=${2:-16}
clients=${3:-4}
root=$(cd "$(dirname "$0")/.." && pwd)
soak="$root/build/tests/dpledger_crash_soak"
[[ -x $soak ]] || { echo "crash_soak.sh: $soak missing; run make build" >&2; exit 2; }
status=0
for store in sqlite postgres; do
  rc=0
  "$soak" --store "$store" --kills "$kills" --clients "$clients" --seed "$seed" --json || rc=$?
  if [[ $rc == 77 ]]; then
    echo "crash_soak.sh: $store skipped (not installed)" >&2
  elif [[ $rc != 0 ]]; then
    status=1
  fi
done
exit $status
