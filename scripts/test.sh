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

pkgs=("$@")
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(./...)

say "control plane binaries"
MYKUBELET_BIN_DIR="$("$REPO_ROOT/scripts/build-control-plane.sh")"
export MYKUBELET_BIN_DIR
export PATH="$MYKUBELET_BIN_DIR:$PATH"

say "gofmt"
unformatted="$(gofmt -l .)"
[[ -z "$unformatted" ]] || die "gofmt would change: $unformatted (run gofmt -w on them)"

say "go vet"
go vet ./...
(cd scripts/tools && go vet ./etcd)

say "shellcheck"
if ! command -v shellcheck >/dev/null && [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
  (apt-get install -y -q shellcheck >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q shellcheck >/dev/null; }) ||
    die "could not install shellcheck (apt-get install shellcheck)"
fi
command -v shellcheck >/dev/null || die "shellcheck is not installed (apt-get install shellcheck)"
mapfile -t scripts < <(git ls-files '*.sh' 2>/dev/null || find scripts chapters -name '*.sh')
shellcheck -x "${scripts[@]}"

say "go test -race ${pkgs[*]}"
go test -race -count=1 -timeout 30m "${pkgs[@]}"
