#!/usr/bin/env bash
# Builds, once, the local control plane: etcd (embedded etcd 3.7, see
# tools/etcd) and kube-apiserver, kube-controller-manager, kube-scheduler and
# kubectl from the Go module k8s.io/kubernetes at $KUBE_VERSION.
# The binaries are cached in $BIN_DIR and rebuilt only when scripts/tools or
# the build flags change. The first build takes 6 to 20 minutes on 2 cores
# (measured: 19 minutes on a 2-core machine busy with other work); it prints
# a line per binary, with the time so far, and every 20 s while go builds
# one, how many packages it has compiled (go_progress in lib.sh).
#
# Then metrics-server $METRICS_SERVER_VERSION, from its Go module
# sigs.k8s.io/metrics-server, into the same directory, with a stamp of its
# own (.metrics-server-stamp): adding or rebuilding it never rebuilds the
# control plane. 3 minutes on an idle machine, more on a busy one (measured:
# 23 minutes on 2 cores busy with other builds).
#
#   scripts/build-control-plane.sh          build if needed, print the bin dir
#   scripts/build-control-plane.sh --force  build again
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

force=false
parse_flags "usage: $0 [--force]" "" "--force" "$@"

command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"

tools="$REPO_ROOT/scripts/tools"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
# What each binary is built from, in the order of bins.
pkgs=(./etcd k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)

ldflags="$(kube_ldflags)"

# The stamp covers what the binaries are made of (the tools module, the
# packages, the flags), not this script's messages: rewording them does
# not cost a rebuild.
stamp_want="$(printf '%s\n' "CGO_ENABLED=0 go build -trimpath" "$ldflags" "${pkgs[@]}" |
  cat - "$tools/go.mod" "$tools/go.sum" "$tools/etcd/main.go" | sha256sum | cut -c1-16)"
stamp_file="$BIN_DIR/.build-stamp"

have_all() {
  local b
  for b in "${bins[@]}"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done
  [[ "$(cat "$stamp_file" 2>/dev/null)" == "$stamp_want" ]]
}

METRICS_SERVER_VERSION="v0.8.0"
ms_pkg="sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION"
# As its Makefile stamps the version (k8s.io/client-go's version package).
ms_ldflags="-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION"
ms_stamp_want="$(printf '%s\n' "CGO_ENABLED=0 go install -trimpath" "$ms_ldflags" "$ms_pkg" | sha256sum | cut -c1-16)"
ms_stamp_file="$BIN_DIR/.metrics-server-stamp"

have_metrics_server() {
  [[ -x "$BIN_DIR/metrics-server" && "$(cat "$ms_stamp_file" 2>/dev/null)" == "$ms_stamp_want" ]]
}

start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }

build_metrics_server() {
  local tmp
  mkdir -p "$BIN_DIR"
  tmp="$(mktemp -d "$BIN_DIR/.build-metrics-server.XXXXXX")"
  say "building metrics-server $METRICS_SERVER_VERSION into $BIN_DIR: the first time, 3 minutes or more on 2 cores"
  if ! (cd "$tmp" && GOBIN="$tmp" CGO_ENABLED=0 go_progress metrics-server install -v -trimpath -ldflags "$ms_ldflags" "$ms_pkg"); then
    rm -rf "$tmp"
    die "building metrics-server failed (see the go output above)"
  fi
  mv -f "$tmp/metrics-server" "$BIN_DIR/metrics-server"
  rm -rf "$tmp"
  echo "$ms_stamp_want" > "$ms_stamp_file"
  say "built metrics-server ($(elapsed))"
}

if ! $force && have_all; then
  if ! have_metrics_server; then build_metrics_server; fi
  echo "$BIN_DIR"
  exit 0
fi

mkdir -p "$BIN_DIR"
tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "building the control plane $KUBE_VERSION into $BIN_DIR: the first time, 6 to 20 minutes on 2 cores (the first Kubernetes binary takes the longest: it compiles what the others share)"
say "downloading the Go modules of k8s.io/kubernetes $KUBE_VERSION…"
(cd "$tools" && go_progress "downloading" mod download) || die "downloading the modules failed (see the go output above)"
say "downloaded ($(elapsed))"
for i in "${!bins[@]}"; do
  b="${bins[$i]}"
  say "building $b ($((i + 1)) of ${#bins[@]})… ($(elapsed) so far)"
  (cd "$tools" && CGO_ENABLED=0 go_progress "$b" build -v -trimpath -ldflags "$ldflags" -o "$tmp/$b" "${pkgs[$i]}") ||
    die "building $b failed (see the go output above)"
done
for b in "${bins[@]}"; do mv -f "$tmp/$b" "$BIN_DIR/$b"; done
echo "$stamp_want" > "$stamp_file"
say "built in $(elapsed)"
if $force || ! have_metrics_server; then build_metrics_server; fi
echo "$BIN_DIR"
