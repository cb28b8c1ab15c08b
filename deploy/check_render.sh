#!/usr/bin/env bash
# ctest deploy_kustomize: both variants render with `kubectl kustomize` (Debian's
# kubernetes-client or a newer kubectl) and hold what deploy/README.md promises.
set -euo pipefail
cd "$(dirname "$0")"
fail() { echo "check_render: $*" >&2; exit 1; }
has() { grep -qE -- "$2" <<<"$1" || fail "$3: expected /$2/"; }
hasnt() { ! grep -qE -- "$2" <<<"$1" || fail "$3: unexpected /$2/"; }

sqlite=$(kubectl kustomize . 2>/dev/null) || fail "kubectl kustomize deploy failed"
has "$sqlite" '^kind: StatefulSet' sqlite
has "$sqlite" '^  replicas: 1' sqlite
hasnt "$sqlite" '^kind: Deployment' sqlite
hasnt "$sqlite" 'DPLEDGER_STORE: postgres' sqlite

pg=$(kubectl kustomize postgres 2>/dev/null) || fail "kubectl kustomize deploy/postgres failed"
has "$pg" '^kind: Deployment' postgres
has "$pg" '^  replicas: 3' postgres
has "$pg" '^kind: PodDisruptionBudget' postgres
hasnt "$pg" '^kind: StatefulSet' postgres
hasnt "$pg" 'volumeClaimTemplates' postgres
hasnt "$pg" 'dpledger-headless' postgres
has "$pg" 'DPLEDGER_STORE: postgres' postgres
has "$pg" 'name: DPLEDGER_POSTGRES_URL' postgres
has "$pg" 'name: dpledger-postgres' postgres
has "$pg" 'readinessProbe:' postgres
has "$pg" 'tcpSocket:' postgres  # liveness must not fail while the database is down
has "$pg" 'image: registry.example.com/dpledger:' postgres
echo "check_render: deploy and deploy/postgres render"
