#!/usr/bin/env bash
# The instructor's side of a workshop on one shared cluster (the local one,
# kind, or any): KUBECONFIG must be a cluster admin's.
#
#   scripts/classroom.sh issue alice bob     one bootstrap token + kubeconfig each
#   scripts/classroom.sh issue --count 20    learner-01 … learner-20
#   scripts/classroom.sh revoke [NAME…]      delete their tokens (all without NAME)
#   scripts/classroom.sh status              every learner's node: Ready, chapter, pods
#
# The bootstrap kubeconfigs go to $MYKUBELET_STATE_DIR/classroom/NAME/
# (default .state, git-ignored), mode 0600. A learner's progress is the
# annotation mykubelet.dev/chapter on their Node.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$REPO_ROOT"
exec go run ./scripts/classroom --state-dir "$STATE_DIR" "$@"
