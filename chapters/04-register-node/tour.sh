# shellcheck shell=bash
# Chapter 04 tour: the node registers itself with its own credentials (the
# node kubeconfig chapter 03 wrote), fills in a complete status, renews its
# Lease, writes its status only when it changes, and cannot touch another node.
# Sourced by scripts/tour.sh with the helpers of scripts/tour-lib.sh.

bin="$(chapter_bin 04-register-node)" || return 1
node_kc="$STATE_DIR/kubelet.kubeconfig"
if [[ ! -f "$node_kc" ]]; then
  echo "tour: chapter 04 needs the node kubeconfig $node_kc, written by chapter 03: run 'scripts/tour.sh 02 03 04'" >&2
  return 1
fi

jp() { kubectl get node "$NODE_NAME" -o jsonpath="$1"; }
is_ready() { [[ "$(jp '{.status.conditions[?(@.type=="Ready")].status}')" == "True" ]]; }

step "Run as the node itself: register (or adopt) node $NODE_NAME, write its status, renew its lease"
bg_start 04-register-node "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" || return 1
wait_for_log 04-register-node "^kubeconfig .*: user system:node:$NODE_NAME, groups system:authenticated,system:nodes" 30 || return 1
wait_for_log 04-register-node '^node .*: registered' 30 || return 1
wait_for_log 04-register-node '^node .*: status written \(first report\)' 30 || return 1
wait_for_log 04-register-node '^lease kube-node-lease/.*: (created|renewed)' 30 || return 1
wait_until 30 is_ready || return 1
show kubectl describe node "$NODE_NAME" || return 1
[[ "$(jp '{.status.nodeInfo.kubeletVersion}')" == "v1.37.1-mykubelet" ]] || { echo "tour: unexpected kubelet version" >&2; return 1; }
[[ "$(jp '{.status.nodeInfo.containerRuntimeVersion}')" == "mock://0.1.0" ]] || { echo "tour: unexpected container runtime version" >&2; return 1; }
[[ -n "$(jp '{.status.addresses[?(@.type=="InternalIP")].address}')" ]] || { echo "tour: no InternalIP" >&2; return 1; }
[[ "$(jp '{.status.capacity.pods}')" == "110" ]] || { echo "tour: capacity pods is not 110" >&2; return 1; }
observe "conditions, addresses, capacity and allocatable (memory 100Mi less: the hard eviction threshold), system info, lease"

step "The node's credentials cannot register another node (NodeRestriction)"
if "$bin" --node-name "$NODE_NAME-other" --state-dir "$STATE_DIR" >"$TOUR_DIR/04-other.out" 2>&1; then
  echo "tour: the node registered another node" >&2
  return 1
fi
grep -E 'forbidden: node ".*" is not allowed to modify node' "$TOUR_DIR/04-other.out" || { cat "$TOUR_DIR/04-other.out" >&2; return 1; }
observe "the Node authorizer lets nodes create Nodes; NodeRestriction admits only their own"

step "Steady state: the lease moves every 10 s, the status is not rewritten while nothing changes"
sleep 25
show grep -E '^(node|lease) ' "$TOUR_DIR/04-register-node.log" || return 1
status_writes="$(grep -c 'status written' "$TOUR_DIR/04-register-node.log")"
renewals="$(grep -c '^lease .*: renewed' "$TOUR_DIR/04-register-node.log")"
[[ "$status_writes" -eq 1 && "$renewals" -ge 2 ]] || { echo "tour: $status_writes status writes and $renewals renewals in ~35 s (want 1 and at least 2)" >&2; return 1; }
observe "$status_writes status write, $renewals lease renewals: the lease is the heartbeat (scripts/node-write-load.sh measures it)"

step "Ctrl-C, then run again: the existing node is adopted"
bg_stop 04-register-node
tail -n 1 "$TOUR_DIR/04-register-node.log"
bg_start 04-register-node-again "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" || return 1
wait_for_log 04-register-node-again '^node .*: registered \(already existed, adopted\)' 30 || return 1
wait_for_log 04-register-node-again '^lease kube-node-lease/.*: renewed' 30 || return 1
bg_stop 04-register-node-again
observe "created once, adopted after: running it again is safe"
