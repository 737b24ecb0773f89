#!/usr/bin/env bash
# Counts the API writes chapter 04's agent makes (lease renewals, node status
# patches) in a throwaway control plane, and prints them per minute. The
# real kubelet's budget: 6 lease renewals a minute, node status only when it
# changes or every 5 minutes.
#
#   scripts/node-write-load.sh        run for 3 minutes
#   scripts/node-write-load.sh 6m     run longer (past one 5-minute report)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

duration="${1:-3m}"
[[ "$duration" =~ ^[0-9]+(s|m|h)$ ]] || die "the duration is a number and a unit, e.g. 3m (got '$duration')"
command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"

MYKUBELET_BIN_DIR="$("$REPO_ROOT/scripts/build-control-plane.sh")"
export MYKUBELET_BIN_DIR

say "running chapter 04's agent for $duration and counting its requests"
go test -run '^$' -bench '^BenchmarkNodeWriteLoad$' -benchtime 1x -timeout 0 \
  ./chapters/04-register-node -args -writeload.duration="$duration"
