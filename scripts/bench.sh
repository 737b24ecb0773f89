#!/usr/bin/env bash
# Prints the project's timed figures. They are benchmarks, not tests: run
# them on a quiet machine and compare, never assert on them.
#
#   scripts/bench.sh                 control-plane start, PLEG relist, pod workers
#   scripts/bench.sh --write-load    also chapter 04's API writes per minute (3 more minutes)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

write_load=false
case "${1:-}" in
  "") ;;
  --write-load) write_load=true ;;
  *) die "usage: scripts/bench.sh [--write-load]" ;;
esac
command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"
MYKUBELET_BIN_DIR="$("$REPO_ROOT/scripts/build-control-plane.sh")"
export MYKUBELET_BIN_DIR

say "control plane: from nothing to ready (fresh certificates and etcd; binaries cached)"
go test -run '^$' -bench '^BenchmarkStart$' -benchtime 3x ./scripts/testkit/testcluster

say "PLEG: one relist with nothing changed (goal: 10,000 containers in under 50 ms)"
go test -run '^$' -bench '^BenchmarkRelist$' -benchmem ./mylib/pleg

say "pod workers: 1,000 pods x 10 updates, and goroutines left after SyncKnownPods"
go test -run '^$' -bench '^BenchmarkPodWorkers1000x10$' -benchtime 5x ./mylib/podworkers

if $write_load; then
  say "chapter 04: API writes per minute (the kubelet's budget: 6 lease renewals, status on change or every 5 min)"
  "$REPO_ROOT/scripts/node-write-load.sh" 3m
fi
