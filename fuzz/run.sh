#!/usr/bin/env bash
# Runs every libFuzzer target of fuzz/ (issue 16).
#   run.sh BUILD_DIR SECONDS smoke|grow [target...]
# smoke: fuzz/corpus/<target> seeds a scratch corpus (the committed one is left as it is);
#        CI runs this.
# grow:  new inputs go into fuzz/corpus/<target>; minimise before committing them with
#        BUILD_DIR/fuzz/<target> -merge=1 NEW_DIR fuzz/corpus/<target>.
# A crash, leak, sanitizer report or timeout (-timeout: 25 s of wall time for one input, room
# for a loaded machine; the targets cap their own queries far below that) fails the run and
# leaves the input in BUILD_DIR/fuzz-artifacts/; turn it into a regression test (fuzz/README.md).
# Prints one line per target: executions, corpus size, result.
set -uo pipefail
build="$1"; seconds="$2"; mode="$3"; shift 3
here="$(cd "$(dirname "$0")" && pwd)"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_step_spec fuzz_token_file fuzz_stored_rows fuzz_service_requests fuzz_accountants)
fi
artifacts="$build/fuzz-artifacts"; mkdir -p "$artifacts"
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=0
for t in "${targets[@]}"; do
  bin="$build/fuzz/$t"; seeds="$here/corpus/$t"; log="$artifacts/$t.log"
  mkdir -p "$seeds"
  args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -max_len=4096
        -print_final_stats=1 -artifact_prefix="$artifacts/$t-")
  [ -f "$here/$t.dict" ] && args+=(-dict="$here/$t.dict")
  if [ "$mode" = grow ]; then
    dirs=("$seeds")
  else
    scratch="$(mktemp -d)"; dirs=("$scratch" "$seeds")
  fi
  "$bin" "${args[@]}" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  [ "$mode" = grow ] || rm -rf "$scratch"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  corpus=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ "$rc" -eq 0 ]; then result=ok; else result="FAILED (rc=$rc, see $log)"; failed=1; fi
  printf 'fuzz %-24s %6ss  executions=%-10s corpus=%-10s %s\n' "$t" "$seconds" "${execs:-?}" \
    "${corpus:-?}" "$result"
  if [ "$rc" -ne 0 ]; then grep -A30 -m1 -E 'ERROR|DPL_CHECK|runtime error|SUMMARY' "$log" | head -40; fi
done
exit "$failed"
