#!/usr/bin/env bash
# Runs every test of mykubelet: formatting, vet, shellcheck, and `go test -race`
# over the whole module, including the integration tests that start real
# control planes (etcd + kube-apiserver + kube-controller-manager +
# kube-scheduler v1.37.1) on loopback. On a fresh machine it first builds
# those (6 to 20 minutes on 2 cores, a line per binary as it goes; cached
# after).
#
#   scripts/test.sh                  everything
#   scripts/test.sh ./mylib/pleg/... only these packages (still builds what they need)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"
warn_low_disk "$STATE_DIR"

pkgs=("$@")
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(./...)

# A line per phase with its time, then the ten slowest test packages and
# the README walk's time per README, printed at the end, pass or fail.
phases=()
phase_start=$SECONDS
phase_name=""
phase() {
  if [[ -n "$phase_name" ]]; then phases+=("$(printf '%-32s %5ds' "$phase_name" $((SECONDS - phase_start)))"); fi
  phase_name="$1"
  phase_start=$SECONDS
  [[ -z "$1" ]] || say "$1"
}
results="$(mktemp)"
MYKUBELET_PHASE_LOG="$(mktemp)"
export MYKUBELET_PHASE_LOG
summary() {
  local rc=$?
  # A report, not a verdict: nothing here changes the exit status.
  set +e
  phase ""
  echo "==> phases (seconds):"
  printf '    %s\n' "${phases[@]}"
  if grep -qE '^(ok|FAIL)[[:space:]]' "$results"; then
    echo "==> the ten slowest test packages:"
    slowest_packages "$results"
  fi
  if [[ -s "$MYKUBELET_PHASE_LOG" ]]; then
    echo "==> the README walk (scripts/tour.sh), per README:"
    sed 's/^/    /' "$MYKUBELET_PHASE_LOG"
  fi
  rm -f "$results" "$MYKUBELET_PHASE_LOG"
  exit "$rc"
}
trap summary EXIT

phase "control plane binaries"
MYKUBELET_BIN_DIR="$("$REPO_ROOT/scripts/build-control-plane.sh")"
export MYKUBELET_BIN_DIR
export PATH="$MYKUBELET_BIN_DIR:$PATH"

phase "gofmt"
unformatted="$(gofmt -l .)"
[[ -z "$unformatted" ]] || die "gofmt would change: $unformatted (run gofmt -w on them)"

phase "go vet"
go vet ./...
(cd scripts/tools && go vet ./etcd)
# The offline images' builder, a module of its own (chapter 19, conformance.sh).
(cd scripts/tools/images && go vet ./... && go test -count=1 ./...)

phase "shellcheck"
if ! command -v shellcheck >/dev/null && [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
  (apt-get install -y -q shellcheck >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q shellcheck >/dev/null; }) ||
    die "could not install shellcheck (apt-get install shellcheck)"
fi
command -v shellcheck >/dev/null || die "shellcheck is not installed (apt-get install shellcheck)"
mapfile -t scripts < <(git ls-files '*.sh' 2>/dev/null || find scripts chapters -name '*.sh')
shellcheck -x "${scripts[@]}"

# The README walk (scripts/readmewalk, through scripts/tour.sh) is the
# longest package, near 30 minutes on 2 cores, and mostly waits (for pods,
# leases, grace periods): run in go test's order it started last, after
# every other package, and ran alone for most of its half hour. So the
# whole module's tests start it first, in a go test of its own beside the
# others', and wait for both. That go test runs the two walks only: the
# package's other tests are not parallel, and a parallel test starts only
# after them (a minute and more under CI's load), so they run with the
# other packages instead.
# go vet ./... ran above, with every analyzer: -vet=off spares go test
# its own pass of a few of them, package by package, on the way to the
# tests.
phase "go test -race ${pkgs[*]}"
walk="./scripts/readmewalk"
if [[ "${pkgs[*]}" == "./..." ]]; then
  walk_log="$(mktemp)"
  walks='^(TestWalkTheCourse|TestWalkOnAnotherCluster)$'
  go test -race -vet=off -count=1 -timeout 50m -run "$walks" "$walk" >"$walk_log" 2>&1 &
  walk_pid=$!
  rc=0
  go test -race -vet=off -count=1 -timeout 30m -skip "$walks" ./... 2>&1 | tee "$results" || rc=$?
  walk_rc=0
  wait "$walk_pid" || walk_rc=$?
  tee -a "$results" <"$walk_log"
  rm -f "$walk_log"
  [[ $rc -eq 0 && $walk_rc -eq 0 ]] || die "go test failed (the README walk: exit $walk_rc; the other packages: exit $rc)"
else
  go test -race -vet=off -count=1 -timeout 50m "${pkgs[@]}" 2>&1 | tee "$results"
fi
