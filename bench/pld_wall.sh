#!/bin/bash
# Wall time of whole `dpledger account --accountant pld` processes (issue 15 item 1
# and 3 targets are process wall times): median, min and max of N runs (default 15),
# timed with date +%s%N, after one warm-up run; prints the load average too, since
# the machine is shared.
# usage: bench/pld_wall.sh [-n N] [dpledger] -- ACCOUNT-ARGS...
set -euo pipefail
n=15
[[ "${1:-}" == -n ]] && { n=$2; shift 2; }
exe=build/client/dpledger
[[ "${1:-}" != -- ]] && { exe=$1; shift; }
shift  # --
"$exe" account --accountant pld "$@" >/dev/null
times=()
for ((i = 0; i < n; i++)); do
  t0=$(date +%s%N)
  "$exe" account --accountant pld "$@" >/dev/null
  times+=($(( ($(date +%s%N) - t0) / 1000 )))
done
sorted=($(printf '%s\n' "${times[@]}" | sort -n))
printf 'median %.1f ms  min %.1f  max %.1f  (n=%d; load %s)  %s\n' \
  "$(echo "${sorted[$((n / 2))]} / 1000" | bc -l)" "$(echo "${sorted[0]} / 1000" | bc -l)" \
  "$(echo "${sorted[$((n - 1))]} / 1000" | bc -l)" "$n" "$(cut -d' ' -f1-3 /proc/loadavg)" "$*"
