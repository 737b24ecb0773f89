# shellcheck shell=bash
# Helpers for the tour (scripts/tour.sh) and each chapter's chapters/NN-slug/tour.sh.
# A chapter's tour.sh is sourced by a bash of its own, started by
# scripts/tour.sh with `set -euo pipefail` (a command that fails, a failed
# pipeline or an unset variable ends the chapter and fails the tour), with
# these helpers in scope, and with:
#   KUBECONFIG   the cluster's admin kubeconfig
#   NODE_NAME    the node name the tour uses
#   STATE_DIR    the state directory (MYKUBELET_STATE_DIR is exported too)
#   TOUR_DIR     a scratch directory for this tour run (logs of background programs)
#   REPO_ROOT    the repository
# It does not change shell options (no `set`); it stops whatever it starts
# (bg_stop; what it leaves running is stopped when it ends), and returns
# non-zero, or runs a command that fails, if what it shows did not happen.

# step TEXT: a heading for the next thing to look at.
step() { printf '\n\033[1m--- %s\033[0m\n' "$*"; }

# observe TEXT: tell the learner what to notice.
observe() { printf '    observe: %s\n' "$*"; }

# show CMD...: print the command, then run it.
show() { printf '$ %s\n' "$*"; "$@"; }

# chapter_bin SLUG: build chapters/SLUG once per tour and print the binary's
# path (the same program `go run ./chapters/SLUG` runs).
chapter_bin() {
  local bin="$TOUR_DIR/bin/$1"
  if [[ ! -x "$bin" ]]; then
    (cd "$REPO_ROOT" && go build -o "$bin" "./chapters/$1") || return 1
  fi
  echo "$bin"
}

# bg_start NAME CMD...: run CMD in the background, output to $TOUR_DIR/NAME.log.
bg_start() {
  local name="$1"; shift
  "$@" >"$TOUR_DIR/$name.log" 2>&1 &
  echo $! >"$TOUR_DIR/$name.pid"
  printf '$ %s &   (output: %s)\n' "$*" "$TOUR_DIR/$name.log"
}

# bg_stop NAME: Ctrl-C the background program and wait for it.
bg_stop() {
  local pid
  pid="$(cat "$TOUR_DIR/$1.pid" 2>/dev/null)" || return 0
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$TOUR_DIR/$1.pid"
}

# bg_stop_all: stop every background program still running (for traps).
bg_stop_all() {
  local f
  for f in "$TOUR_DIR"/*.pid; do
    [[ -e "$f" ]] || continue
    bg_stop "$(basename "$f" .pid)"
  done
}

# wait_for_log NAME REGEX [SECONDS]: wait until the background program's
# output matches REGEX; print the matching line. Fails after SECONDS (60).
wait_for_log() {
  local name="$1" re="$2" secs="${3:-60}" i line
  for ((i = 0; i < secs * 5; i++)); do
    if line="$(grep -E -m1 -- "$re" "$TOUR_DIR/$name.log" 2>/dev/null)"; then
      printf '    %s\n' "$line"
      return 0
    fi
    sleep 0.2
  done
  echo "tour: '$name' did not print /$re/ within ${secs}s; its output:" >&2
  tail -n 20 "$TOUR_DIR/$name.log" >&2
  return 1
}

# wait_until SECONDS CMD...: retry CMD (quietly) every second until it succeeds.
wait_until() {
  local secs="$1" i; shift
  for ((i = 0; i < secs; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  echo "tour: gave up after ${secs}s waiting for: $*" >&2
  return 1
}
