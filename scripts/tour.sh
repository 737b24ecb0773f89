#!/usr/bin/env bash
# The tutorial end to end: brings up the local cluster when KUBECONFIG is not
# set, then runs every chapter that exists, in order, saying what to observe.
#
#   scripts/tour.sh                 all chapters
#   scripts/tour.sh 03 04           only these chapters
#   NODE_NAME=my-node scripts/tour.sh
#
# The local cluster is left running for you to explore; stop it with
# `scripts/cluster.sh down`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/tour-lib.sh
source "$REPO_ROOT/scripts/tour-lib.sh"

only=("$@")
for n in "${only[@]}"; do
  [[ "$n" =~ ^[0-9][0-9]$ ]] || die "chapters are named by their two digits, e.g. 'scripts/tour.sh 01 02' (got '$n')"
  compgen -G "$REPO_ROOT/chapters/$n-*/" >/dev/null || die "there is no chapter $n (see chapters/)"
done

command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"
if [[ -z "${KUBECONFIG:-}" ]]; then
  step "KUBECONFIG is not set: starting the local control plane (scripts/cluster.sh up)"
  "$REPO_ROOT/scripts/cluster.sh" up
  eval "$("$REPO_ROOT/scripts/cluster.sh" env)"
else
  step "Using the cluster in KUBECONFIG=$KUBECONFIG"
fi
command -v kubectl >/dev/null || die "kubectl not found: run scripts/build-control-plane.sh and add its bin dir to PATH (eval \"\$(scripts/cluster.sh env)\")"
kubectl get --raw /readyz >/dev/null 2>&1 || die "the API server in $KUBECONFIG does not answer /readyz"

export KUBECONFIG STATE_DIR REPO_ROOT
export MYKUBELET_STATE_DIR="$STATE_DIR"
# The state directory holds keys and the mock runtime's control socket:
# its user's alone (the control API refuses a directory others can enter).
mkdir -p "$STATE_DIR"
chmod 700 "$STATE_DIR"
export NODE_NAME="${NODE_NAME:-$(hostname | tr '[:upper:]' '[:lower:]')}"
TOUR_DIR="$(mktemp -d "${TMPDIR:-/tmp}/mykubelet-tour.XXXXXX")"
export TOUR_DIR
# The built programs (over a gigabyte) go when the tour ends; the logs stay
# when a chapter failed, and go too when all passed. Eleven tours' leftovers
# once filled a disk enough for the kubelet's DiskPressure to evict pods.
trap 'bg_stop_all; rm -rf "$TOUR_DIR/bin"' EXIT

ran=0
for dir in "$REPO_ROOT"/chapters/[0-9][0-9]-*/; do
  slug="$(basename "$dir")"
  if [[ ${#only[@]} -gt 0 ]] && [[ ! " ${only[*]} " =~ \ ${slug:0:2}\  ]]; then continue; fi
  if [[ ! -f "$dir/tour.sh" ]]; then
    echo "(chapter $slug has no tour yet)"
    continue
  fi
  printf '\n\033[1m=== Chapter %s\033[0m   (read chapters/%s/README.md)\n' "$slug" "$slug"
  # Each chapter's tour runs in a bash of its own with -euo pipefail, so a
  # command that fails ends the chapter (in a subshell tested by `||`, bash
  # would ignore -e), the chapter cannot change this script's options, and
  # whatever it left running is stopped when it ends.
  # shellcheck disable=SC2016 # expanded by the child bash
  bash -euo pipefail -c 'source "$REPO_ROOT/scripts/tour-lib.sh"; trap bg_stop_all EXIT; source "$1"' \
    "tour $slug" "$dir/tour.sh" || die "chapter $slug: the tour step above failed"
  ran=$((ran + 1))
done

bg_stop_all
rm -rf "$TOUR_DIR"
printf '\n\033[1m=== Done: %d chapters.\033[0m Node %s is yours to explore (kubectl get node %s).\n' "$ran" "$NODE_NAME" "$NODE_NAME"
echo "Stop the local cluster with: scripts/cluster.sh down"
