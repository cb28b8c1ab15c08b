#!/usr/bin/env bash
# ctest prometheus_rules: the rule files pass `promtool check rules` and their unit tests
# (`promtool test rules`, Debian's prometheus package), and deploy/base/prometheusrule.yaml
# holds exactly the groups of the plain file.
set -euo pipefail
cd "$(dirname "$0")"
fail() { echo "check_rules: $*" >&2; exit 1; }
for f in *-rules.yaml; do promtool check rules "$f"; done
for t in *_test.yaml; do promtool test rules "$t"; done
# The PrometheusRule's spec, de-indented, against the plain file without its comments.
diff <(sed -n '/^spec:$/,$p' ../base/prometheusrule.yaml | tail -n +2 | sed 's/^  //') \
     <(grep -v '^#' dpledger-rules.yaml) \
  || fail "deploy/base/prometheusrule.yaml differs from dpledger-rules.yaml (regenerate it)"
# kubectl renders it into both variants.
for v in .. ../postgres; do
  kubectl kustomize "$v" 2>/dev/null | grep -q '^kind: PrometheusRule' || fail "$v renders no PrometheusRule"
done
echo "check_rules: rules check, their unit tests pass, PrometheusRule matches"
