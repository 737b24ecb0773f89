#!/usr/bin/env bash
# Builds, once, the local control plane: etcd (embedded etcd 3.7, see
# tools/etcd) and kube-apiserver, kube-controller-manager, kube-scheduler and
# kubectl from the Go module k8s.io/kubernetes at $KUBE_VERSION.
# The binaries are cached in $BIN_DIR and rebuilt only when scripts/tools changes.
#
#   scripts/build-control-plane.sh          build if needed, print the bin dir
#   scripts/build-control-plane.sh --force  build again
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

force=false
case "${1:-}" in
  "") ;;
  --force) force=true ;;
  *) die "unknown argument '$1' (usage: $0 [--force])" ;;
esac

command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"

tools="$REPO_ROOT/scripts/tools"
stamp_want="$(cat "$tools/go.mod" "$tools/go.sum" "$tools/etcd/main.go" "$0" | sha256sum | cut -c1-16)"
stamp_file="$BIN_DIR/.stamp"
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)

have_all() {
  local b
  for b in "${bins[@]}"; do [[ -x "$BIN_DIR/$b" ]] || return 1; done
  [[ "$(cat "$stamp_file" 2>/dev/null)" == "$stamp_want" ]]
}

if ! $force && have_all; then
  echo "$BIN_DIR"
  exit 0
fi

major="${KUBE_VERSION#v}"; major="${major%%.*}"
minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

mkdir -p "$BIN_DIR"
tmp="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "building the control plane $KUBE_VERSION into $BIN_DIR (6 to 8 minutes on 2 cores the first time)"
start=$SECONDS
(
  cd "$tools"
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
    ./etcd \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
) || die "building the control plane failed (see the go output above)"
for b in "${bins[@]}"; do mv -f "$tmp/$b" "$BIN_DIR/$b"; done
echo "$stamp_want" > "$stamp_file"
say "built in $((SECONDS - start))s"
echo "$BIN_DIR"
