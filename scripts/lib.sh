# shellcheck shell=bash
# Shared settings for mykubelet's scripts. Source it; do not run it.
#
#   MYKUBELET_STATE_DIR  generated files: certs, keys, kubeconfigs, logs (git-ignored)
#   MYKUBELET_CACHE_DIR  built control-plane binaries, kept between runs and clones

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO_ROOT
KUBE_VERSION="v1.37.1"
export KUBE_VERSION
STATE_DIR="${MYKUBELET_STATE_DIR:-$REPO_ROOT/.state}"
CACHE_DIR="${MYKUBELET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mykubelet}"
BIN_DIR="$CACHE_DIR/control-plane-$KUBE_VERSION/bin"
export STATE_DIR CACHE_DIR BIN_DIR

die() { echo "error: $*" >&2; exit 1; }
say() { echo "==> $*" >&2; }
