#!/usr/bin/env bash
# The local control plane: etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler on 127.0.0.1, no Docker, no VM; and metrics-server, which
# serves `kubectl top` (the API metrics.k8s.io) through the API server.
#
#   scripts/cluster.sh up       build once (cached), start, wait until ready
#   scripts/cluster.sh down     stop exactly the processes `up` started
#   scripts/cluster.sh status   which components run, and /readyz
#   scripts/cluster.sh env      print the exports that point kubectl at it:
#                                 eval "$(scripts/cluster.sh env)"
#   scripts/cluster.sh logs [COMPONENT]   the last lines of the logs
#
# Settings: MYKUBELET_STATE_DIR (default .state), MYKUBELET_CACHE_DIR,
# MYKUBELET_NODE_MONITOR_GRACE_PERIOD (default: upstream's 50s),
# MYKUBELET_CLUSTER_SIGNING_DURATION (kube-controller-manager's
# --cluster-signing-duration; default: upstream's, a year),
# MYKUBELET_CLUSTER_CIDR (its --cluster-cidr, the range each node's
# spec.podCIDR, a /24, comes from; default 10.128.0.0/12), and the ports
# MYKUBELET_APISERVER_PORT (6443), MYKUBELET_ETCD_PORT (2379),
# MYKUBELET_ETCD_PEER_PORT (2380), MYKUBELET_CONTROLLER_MANAGER_PORT (10257),
# MYKUBELET_SCHEDULER_PORT (10259), MYKUBELET_METRICS_SERVER_PORT (4443; the
# manifest's 10250 is the kubelet's; a free port when MYKUBELET_APISERVER_PORT
# is set and it is not, so that clusters moved to other ports do not share
# it), and MYKUBELET_METRIC_RESOLUTION
# (metrics-server's --metric-resolution; default: the manifest's 15s, at
# least 10s).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CLUSTER_DIR="$STATE_DIR/cluster"
KUBECONFIG_FILE="$CLUSTER_DIR/admin.kubeconfig"

localcluster() {
  (cd "$REPO_ROOT" && go run ./scripts/localcluster -dir "$CLUSTER_DIR" -bin-dir "$BIN_DIR" "$@")
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  up)
    [[ $# -eq 0 ]] || die "up takes no arguments"
    command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"
    "$REPO_ROOT/scripts/build-control-plane.sh" >/dev/null
    mkdir -p "$STATE_DIR" && chmod 0700 "$STATE_DIR"
    say "starting the local control plane (go run ./scripts/localcluster: the first time it compiles, a minute or two)"
    ms_port="${MYKUBELET_METRICS_SERVER_PORT:-4443}"
    if [[ -z "${MYKUBELET_METRICS_SERVER_PORT:-}" && -n "${MYKUBELET_APISERVER_PORT:-}" ]]; then ms_port=0; fi
    localcluster \
      -etcd-port "${MYKUBELET_ETCD_PORT:-2379}" \
      -etcd-peer-port "${MYKUBELET_ETCD_PEER_PORT:-2380}" \
      -apiserver-port "${MYKUBELET_APISERVER_PORT:-6443}" \
      -controller-manager-port "${MYKUBELET_CONTROLLER_MANAGER_PORT:-10257}" \
      -scheduler-port "${MYKUBELET_SCHEDULER_PORT:-10259}" \
      -node-monitor-grace-period "${MYKUBELET_NODE_MONITOR_GRACE_PERIOD:-0}" \
      -cluster-signing-duration "${MYKUBELET_CLUSTER_SIGNING_DURATION:-0}" \
      -cluster-cidr "${MYKUBELET_CLUSTER_CIDR:-}" \
      -metrics-server \
      -metrics-server-port "$ms_port" \
      -metric-resolution "${MYKUBELET_METRIC_RESOLUTION:-0}" up
    cat >&2 <<MSG
Admin kubeconfig: $KUBECONFIG_FILE (mode 0600)
Use it in this shell with:
  eval "\$(scripts/cluster.sh env)"
  kubectl get --raw /readyz
  kubectl top node      # once metrics-server has scraped a node's kubelet twice
MSG
    ;;
  down)
    [[ $# -eq 0 ]] || die "down takes no arguments"
    localcluster down
    ;;
  status)
    [[ $# -eq 0 ]] || die "status takes no arguments"
    localcluster status
    printf '%-24s %s\n' "/readyz" "$("$BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" get --raw /readyz 2>&1 | head -n 1)"
    printf '%-24s %s\n' "v1beta1.metrics.k8s.io" "$("$BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_FILE" get apiservice v1beta1.metrics.k8s.io \
      -o jsonpath='{range .status.conditions[?(@.type=="Available")]}Available={.status} {.message}{end}' 2>&1 | head -n 1)"
    ;;
  env)
    [[ -f "$KUBECONFIG_FILE" ]] || die "no local cluster yet: run scripts/cluster.sh up"
    echo "export KUBECONFIG='$KUBECONFIG_FILE'"
    echo "export PATH='$BIN_DIR':\"\$PATH\""
    ;;
  logs)
    [[ -d "$CLUSTER_DIR/logs" ]] || die "no logs yet: run scripts/cluster.sh up"
    if [[ $# -gt 0 ]]; then
      [[ -f "$CLUSTER_DIR/logs/$1.log" ]] || die "no log for '$1' (components: etcd kube-apiserver kube-controller-manager kube-scheduler metrics-server)"
      tail -n 50 "$CLUSTER_DIR/logs/$1.log"
    else
      tail -n 20 "$CLUSTER_DIR"/logs/*.log
    fi
    ;;
  *)
    die "usage: scripts/cluster.sh up|down|status|env|logs [COMPONENT]"
    ;;
esac
