#!/usr/bin/env bash
# Runs ctest in a sanitizer build folder (make check-asan / make check-tsan, issue 16).
#   check_sanitized.sh BUILD_DIR asan|tsan [ctest args...]      (CHECK_ALL=1: no test left out)
# Every instrumented process, the dpledgerd and dpledger that the e2e tests start included,
# writes its reports under BUILD_DIR/sanitizer-logs/ (log_path); a test binary that finds
# a problem also fails by itself. The run fails when either happened.
set -euo pipefail
build="$1"; kind="$2"; shift 2
here="$(cd "$(dirname "$0")" && pwd)"
logs="$(cd "$build" && pwd)/sanitizer-logs"
rm -rf "$logs"; mkdir -p "$logs"

case "$kind" in
  asan)
    export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
    export LSAN_OPTIONS="suppressions=$here/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1"
    ;;
  tsan)
    export TSAN_OPTIONS="log_path=$logs/tsan:suppressions=$here/tsan.supp:print_suppressions=0:second_deadlock_stack=1:halt_on_error=0"
    ;;
  *) echo "check_sanitized.sh: kind must be asan or tsan, got '$kind'" >&2; exit 2 ;;
esac

# ASan leaves out the core/ tests too slow for it (scripts/asan_slow_tests.txt says why)
# unless CHECK_ALL=1.
if [ "$kind" = asan ] && [ "${CHECK_ALL:-0}" != 1 ]; then
  slow=$(grep -v '^#' "$here/asan_slow_tests.txt" | sed 's/[.]/\\./g; s/[*]/.*/g; s/.*/^&/' | paste -sd'|')
  echo "check_sanitized.sh: leaving out the core/ tests in scripts/asan_slow_tests.txt"
  set -- -E "$slow" "$@"
fi

status=0
ctest --test-dir "$build" --output-on-failure "$@" || status=$?

# Reports from child processes (log_path appends .<pid>). Empty files are not reports.
reports=$(find "$logs" -type f -size +0 | sort)
if [ -n "$reports" ]; then
  echo "check_sanitized.sh: $(echo "$reports" | wc -l) $kind report file(s):"
  for f in $reports; do echo "== $f"; head -60 "$f"; done
  status=1
fi
if [ "$status" -eq 0 ]; then echo "check_sanitized.sh: $kind clean"; fi
exit "$status"
