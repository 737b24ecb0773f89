#!/usr/bin/env bash
# What node heartbeats cost the control plane, measured: chapter 14's fleet
# in lease mode and in status mode (before v1.14), and KWOK v0.8.0 with its
# lease stage, each holding the same number of nodes on a fresh local
# control plane. Prints writes/s, request-body bytes/s, etcd's growth, and
# the CPU and RSS of kube-apiserver, etcd and the node tool. It prints; it
# asserts nothing about time.
#
#   scripts/fleet-bench.sh                       100 nodes, 3 minutes per run
#   scripts/fleet-bench.sh 100,1000 2m           sizes and measured window
#   scripts/fleet-bench.sh 1000 2m lease,kwok    only some of lease,status,kwok
#   scripts/fleet-bench.sh 1000 2m lease,lease@80Mi,kwok
#                                                the fleet also with --memory-limit 80Mi
#
# KWOK is installed from the Go module proxy into a temporary directory
# (never into the repository) and pointed at the local control plane only.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

sizes="${1:-100}"
window="${2:-3m}"
modes="${3:-lease,status,kwok}"
kwok_version="v0.8.0"
[[ "$sizes" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "sizes are numbers separated by commas, e.g. 100,1000 (got '$sizes')"
[[ "$window" =~ ^[0-9]+(s|m)$ ]] || die "the window is a number and a unit, e.g. 3m (got '$window')"
mode_re='((lease|status)(@[0-9]+Mi)?|kwok)'
[[ "$modes" =~ ^$mode_re(,$mode_re)*$ ]] || die "modes are lease, status and kwok separated by commas, lease@80Mi for a memory limit (got '$modes')"
command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"

MYKUBELET_BIN_DIR="$("$REPO_ROOT/scripts/build-control-plane.sh")"
export MYKUBELET_BIN_DIR

kwok_args=()
if [[ "$modes" == *kwok* ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  say "installing kwok $kwok_version from the Go module proxy into $tmp"
  GOBIN="$tmp" go install "sigs.k8s.io/kwok/cmd/kwok@$kwok_version"
  # KWOK's own stages, from its module: initialize a node, then keep its
  # Lease (and, every 10 to 20 minutes, its status) fresh.
  stages="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$kwok_version/kustomize/stage/node"
  {
    cat "$stages/fast/node-initialize.yaml"
    echo "---"
    cat "$stages/heartbeat-with-lease/node-heartbeat-with-lease.yaml"
  } >"$tmp/stages.yaml"
  kwok_args=(-fleet.kwok "$tmp/kwok" -fleet.kwok-stages "$tmp/stages.yaml")
fi

say "sizes $sizes, modes $modes, $window measured per run after a 30 s warm-up (load now: $(cut -d' ' -f1-3 /proc/loadavg))"
go test -run '^$' -bench '^BenchmarkFleet$' -benchtime 1x -timeout 0 ./chapters/14-node-fleet \
  -args -fleet.nodes "$sizes" -fleet.window "$window" -fleet.modes "$modes" "${kwok_args[@]}"
