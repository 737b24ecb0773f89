#!/usr/bin/env bash
# The tutorial end to end: walks README.md and then every chapter's README,
# in order, running their marked commands exactly as written (the same
# blocks CI walks: scripts/readmewalk), printing each command, what it
# printed, and what to observe.
#
#   scripts/tour.sh                 README.md and every chapter
#   scripts/tour.sh 15 16           README.md, what 15 and 16 need, then 15 and 16
#   NODE_NAME=my-node scripts/tour.sh
#
# Without KUBECONFIG, README.md's first step starts the local control plane
# (scripts/cluster.sh up), which is left running for you to explore; stop it
# with `scripts/cluster.sh down`. With KUBECONFIG set (kind in the lima VM, a
# classroom's cluster), the steps marked local are not run and the tour uses
# that cluster.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"
exec go run ./scripts/readmewalk/tour "$@"
