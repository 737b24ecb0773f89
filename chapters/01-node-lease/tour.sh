# shellcheck shell=bash
# Chapter 01 tour: a Node is Ready while its conditions say so and its Lease
# is renewed. Create the node, watch the lease move, stop the program and watch
# the node lifecycle controller mark it NotReady and taint it, start again.
# Sourced by scripts/tour.sh with the helpers of scripts/tour-lib.sh.

bin="$(chapter_bin 01-node-lease)" || return 1
grace="${MYKUBELET_NODE_MONITOR_GRACE_PERIOD:-50s}"

ready_status() { kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
renew_time() { kubectl get lease -n kube-node-lease "$NODE_NAME" -o jsonpath='{.spec.renewTime}'; }
is_unknown() { [[ "$(ready_status)" == "Unknown" ]]; }
has_noschedule_taint() { kubectl get node "$NODE_NAME" -o jsonpath='{.spec.taints[*].effect}' | grep -qw NoSchedule; }
is_ready_untainted() { [[ "$(ready_status)" == "True" && -z "$(kubectl get node "$NODE_NAME" -o jsonpath='{.spec.taints}')" ]]; }

step "Create node $NODE_NAME, post its four conditions, renew its Lease (admin kubeconfig)"
bg_start 01-node-lease "$bin" --node-name "$NODE_NAME" || return 1
wait_for_log 01-node-lease '^node .*: posted conditions' 30 || return 1
wait_for_log 01-node-lease '^lease kube-node-lease/.*: (created|renewed)' 30 || return 1
show kubectl get node "$NODE_NAME" || return 1
[[ "$(ready_status)" == "True" ]] || { echo "tour: node $NODE_NAME is not Ready" >&2; return 1; }
show kubectl get lease -n kube-node-lease "$NODE_NAME" || return 1
first="$(renew_time)"
printf '    renewTime: %s\n' "$first"
renewed_since_first() { [[ "$(renew_time)" != "$first" ]]; }
wait_until 20 renewed_since_first || return 1
printf '    renewTime: %s\n' "$(renew_time)"
observe "Ready=True is the condition we posted; the lease's renewTime moves every 10 s: that is the heartbeat"

step "Ctrl-C: the lease is no longer renewed; wait for the node lifecycle controller (grace period $grace)"
bg_stop 01-node-lease
tail -n 1 "$TOUR_DIR/01-node-lease.log"
wait_until 150 is_unknown || return 1
wait_until 30 has_noschedule_taint || return 1
show kubectl get node "$NODE_NAME" || return 1
show kubectl get node "$NODE_NAME" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}{"\n"}{end}' || return 1
show kubectl get node "$NODE_NAME" -o jsonpath='{range .spec.taints[*]}{.key}:{.effect}{"\n"}{end}' || return 1
observe "NotReady, every condition Unknown (NodeStatusUnknown), tainted node.kubernetes.io/unreachable:NoSchedule"
observe "if $NODE_NAME is the only node, there is no NoExecute taint: the controller is in 'master disruption mode' and evicts nothing"

step "Start it again: Ready comes back and the taints go"
bg_start 01-node-lease-again "$bin" --node-name "$NODE_NAME" || return 1
wait_for_log 01-node-lease-again '^node .*: already registered, adopting it' 30 || return 1
wait_until 60 is_ready_untainted || return 1
show kubectl get node "$NODE_NAME" || return 1
bg_stop 01-node-lease-again
observe "the program posted Ready=True again and renews the lease; the controller removed its taints"
