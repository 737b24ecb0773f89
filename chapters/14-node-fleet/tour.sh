# shellcheck shell=bash
# Chapter 14 tour: a fleet of node agents in one program, each with its own
# identity (chapter 02's bootstrap token, one CSR per node), first with
# today's heartbeat (the Lease), then the way kubelets did before v1.14 (the
# whole status every 10 s); the request rates of each; cleanup.
# Sourced by scripts/tour.sh with the helpers of scripts/tour-lib.sh.

bin="$(chapter_bin 14-node-fleet)" || return 1
if [[ ! -f "$STATE_DIR/bootstrap-kubelet.kubeconfig" ]]; then
  echo "tour: chapter 14 needs the bootstrap kubeconfig written by chapter 02: run 'scripts/tour.sh 02 14'" >&2
  return 1
fi
nodes=20
count_nodes() { kubectl get nodes -l "mykubelet.dev/fleet=$1" --no-headers | wc -l; }

step "Run $nodes node agents, each as itself, with today's heartbeat: the Lease"
bg_start 14-lease "$bin" --nodes "$nodes" --state-dir "$STATE_DIR" || return 1
wait_for_log 14-lease '^identities: ' 180 || return 1
wait_for_log 14-lease '^registered: ' 60 || return 1
wait_for_log 14-lease '^last 10s: .*\(PUT leases [0-9.]+\), ' 60 || return 1
[[ "$(count_nodes fleet)" -eq "$nodes" ]] || { echo "tour: expected $nodes fleet nodes" >&2; return 1; }
show kubectl get leases -n kube-node-lease fleet-0001 fleet-0002 || return 1
show kubectl auth whoami --kubeconfig "$STATE_DIR/fleet/fleet/fleet-0001/kubelet.kubeconfig" || return 1
observe "one Lease renewal per node every 10 s, no status write: $nodes nodes make $nodes/10 writes a second"
bg_stop 14-lease
tail -n 1 "$TOUR_DIR/14-lease.log"

step "The same, before v1.14: no Lease, the whole status patched every 10 s"
bg_start 14-status "$bin" --nodes "$nodes" --mode status --fleet-name old --state-dir "$STATE_DIR" || return 1
wait_for_log 14-status '^last 10s: .*\(PATCH nodes/status [0-9.]+\), ' 180 || return 1
if kubectl get leases -n kube-node-lease old-0001 >/dev/null 2>&1; then
  echo "tour: a status-mode node has a lease" >&2
  return 1
fi
observe "as many writes, but each rewrites the whole Node in etcd: scripts/fleet-bench.sh measures both"
bg_stop 14-status

step "Clean up both fleets (admin kubeconfig); the identities stay in $STATE_DIR/fleet for a restart"
show "$bin" --cleanup || return 1
show "$bin" --cleanup --fleet-name old || return 1
[[ "$(count_nodes fleet)" -eq 0 && "$(count_nodes old)" -eq 0 ]] || { echo "tour: fleet nodes left" >&2; return 1; }
