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
# Before its first step it builds, with the progress shown as it goes, what
# the READMEs it walks build on first use (the control plane, chapter 19's
# runtime and the e2e specs: scripts/readmewalk/builds.go). A step that
# fails, or Ctrl-C, stops what that step started, runs the undo of what its
# README started (chapter 19's containerd), and stops the programs in
# the background; a tour killed outright is cleaned up by the next one.
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
warn_low_disk "$STATE_DIR"
# Built, then started: Ctrl-C and SIGTERM reach the tour itself, which
# stops the step it runs and what that step started.
say "compiling the tour (go build ./scripts/readmewalk/tour; the first time, with the Go modules it downloads, a minute or two)"
mkdir -p "$STATE_DIR" && chmod 0700 "$STATE_DIR"
go_progress "the tour" build -v -o "$STATE_DIR/tour" ./scripts/readmewalk/tour || die "could not build the tour (see the go output above)"
exec "$STATE_DIR/tour" "$@"
