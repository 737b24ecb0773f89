#!/usr/bin/env bash
# Builds, once, the two nodes scripts/startup-bench.sh measures the capstone
# against, into the control plane's bin directory ($BIN_DIR), each with a
# stamp of its own (adding or rebuilding them never rebuilds the control
# plane):
#
#   kwok      KWOK $KWOK_VERSION (sigs.k8s.io/kwok/cmd/kwok): pods' statuses
#             from templates, no kubelet logic at all;
#   kubemark  upstream's kubelet $KUBE_VERSION as a hollow node
#             (k8s.io/kubernetes/cmd/kubemark, from the module
#             scripts/tools/kubemark): the real kubelet code over a fake CRI.
#
# Neither is needed by the tutorial or the tests. The first build takes about
# 4 minutes for kubemark once the control plane is built (it shares its
# compiled packages) and 3 to 10 minutes for KWOK on 2 cores.
#
#   scripts/build-bench-nodes.sh          build what is missing, print the bin dir
#   scripts/build-bench-nodes.sh --force  build both again
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

force=false
parse_flags "usage: $0 [--force]" "" "--force" "$@"
command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"

KWOK_VERSION="v0.8.0"
kwok_pkg="sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
module="$REPO_ROOT/scripts/tools/kubemark"

start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }

# build NAME STAMP COMMAND…: runs COMMAND with $out set to a temporary
# file, then moves it to $BIN_DIR/NAME and writes the stamp.
build() {
  local name="$1" stamp="$2" tmp
  shift 2
  if ! $force && [[ -x "$BIN_DIR/$name" && "$(cat "$BIN_DIR/.$name-stamp" 2>/dev/null)" == "$stamp" ]]; then
    return
  fi
  mkdir -p "$BIN_DIR"
  tmp="$(mktemp -d "$BIN_DIR/.build-$name.XXXXXX")"
  say "building $name into $BIN_DIR ($(elapsed) so far)"
  if ! out="$tmp/$name" "$@"; then
    rm -rf "$tmp"
    die "building $name failed (see the go output above)"
  fi
  mv -f "$tmp/$name" "$BIN_DIR/$name"
  rm -rf "$tmp"
  echo "$stamp" >"$BIN_DIR/.$name-stamp"
  say "built $name ($(elapsed))"
}

# KWOK does nothing without stages: kwok-stages.yaml holds the ones kwokctl
# starts it with by default (its kustomize/stage/fast: a node Ready at
# once, its Lease renewed, a pod Running at once, then deleted).
build_kwok() {
  local dir src
  dir="$(dirname "$out")"
  (cd "$dir" && GOBIN="$dir" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$kwok_pkg") || return 1
  src="$(cd "$dir" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -d "$src/kustomize/stage" ]] || { echo "no kustomize/stage in the module $kwok_pkg ($src)" >&2; return 1; }
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$src/kustomize/stage/$f"
  done >"$dir/kwok-stages.yaml"
  mv -f "$dir/kwok-stages.yaml" "$BIN_DIR/kwok-stages.yaml"
}
build_kubemark() {
  (cd "$module" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out" k8s.io/kubernetes/cmd/kubemark)
}

build kwok "$(printf '%s\n' "$kwok_pkg" -s -w | sha256sum | cut -c1-16)" build_kwok
build kubemark "$(cat "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-16)" build_kubemark
echo "$BIN_DIR"
