# shellcheck shell=bash
# Chapter 05 tour: the PLEG over the mock CRI runtime. No cluster needed.
# Sourced by scripts/tour.sh with the helpers of scripts/tour-lib.sh.

bin="$(chapter_bin 05-pleg)" || return 1
log="$TOUR_DIR/pleg.log"

step "Serve the mock CRI runtime with two sample pods, and run the PLEG against it"
bg_start pleg "$bin" --seed-pods || return 1
wait_for_log pleg 'control API on unix://' 30 || return 1
sock="$STATE_DIR/runtime-control.sock" # only this user may connect: mode 0600, in a directory of mode 0700
wait_for_log pleg 'ContainerStarted pod=default/busybox sandbox' 30 || return 1
observe "the first relist reports every container and sandbox as started: the PLEG had never seen them"
show curl -sS --unix-socket "$sock" http://localhost/ || return 1

step "Kill nginx's container behind the PLEG's back"
show curl -sS --unix-socket "$sock" -X POST "http://localhost/pods/default/nginx/containers/nginx/kill" || return 1
wait_for_log pleg 'ContainerDied pod=default/nginx container=nginx' 10 || return 1
observe "within a relist period (1s) the PLEG reports ContainerDied, with the exit code 137 of SIGKILL"

step "Remove it"
show curl -sS --unix-socket "$sock" -X POST "http://localhost/pods/default/nginx/containers/nginx/remove" || return 1
wait_for_log pleg 'ContainerRemoved pod=default/nginx container=nginx' 10 || return 1
observe "a container seen exited and now gone: ContainerRemoved"

step "Stop busybox as the kubelet would: SIGTERM, then SIGKILL after the grace period"
show curl -sS --unix-socket "$sock" -X POST "http://localhost/pods/default/busybox/containers/busybox/stop" || return 1
wait_for_log pleg 'ContainerDied pod=default/busybox container=busybox .* exitCode=1' 10 || return 1
observe "its script traps SIGTERM and exits 1: the exit code is the container's own; nothing restarts it (the kubelet would create a new container)"

step "Stop it (Ctrl-C)"
bg_stop pleg
grep -E '^stopped:' "$log" | sed 's/^/    /'
grep -qE '^stopped: PLEG healthy' "$log" || { echo "tour: the PLEG did not stop healthy" >&2; return 1; }
