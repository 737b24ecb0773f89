#!/usr/bin/env bash
# Pod startup on four nodes of one control plane, in one run: KWOK (pods'
# statuses from templates, no kubelet logic), upstream's kubelet as a
# kubemark hollow node (the real kubelet code over a fake CRI), the
# capstone mykubelet (chapters/13-mykubelet, its mock runtime in process;
# as root, with its pod network) and chapter 09. Each gets a warm-up burst,
# then the measured bursts interleave the nodes. It prints, per node, the
# startup latency's p50/p90/p99 (SIG Scalability's SLI: created -> all
# containers started, seen through a watch), the p99's ratio to KWOK's, the
# API writes per started pod, the CPU-seconds per started pod of the API
# server and of the node's own process, and how busy the whole machine was
# while the pods started (near 100%: the burst waited for CPU). It asserts
# nothing about time: run it on a quiet machine and quote the load it
# prints with the figures.
#
# The pods are the same on every node: one busybox container, bound to the
# node by spec.nodeName, in the default namespace, so the ServiceAccount
# admission gives each its token volume (kube-api-access-*), which the
# kubelets mount (KWOK mounts nothing). Events stay on everywhere.
#
#   scripts/startup-bench.sh                       100 pods, 2 measured rounds, all four nodes
#   scripts/startup-bench.sh --pods 50 --rounds 3
#   scripts/startup-bench.sh --nodes kwok,capstone  only those, in that order (the first is the ratios' reference)
#
# KWOK v0.8.0 and kubemark are built once by scripts/build-bench-nodes.sh
# (minutes; cached beside the control plane).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/realnode.sh
source "$REPO_ROOT/scripts/realnode.sh"
cd "$REPO_ROOT"

usage="usage: scripts/startup-bench.sh [--pods N] [--rounds N] [--nodes kwok,kubemark,capstone,09]"
pods=100 rounds=2 nodes="kwok,kubemark,capstone,09"
parse_flags "$usage" "--pods --rounds --nodes" "" "$@"
whole_numbers pods rounds
((pods <= 110)) || die "--pods ($pods) cannot be above 110, the nodes' --max-pods"
IFS=, read -r -a wanted <<<"$nodes"
((${#wanted[@]} > 0)) || die "--nodes names no node ($usage)"
for n in "${wanted[@]}"; do
  case "$n" in kwok | kubemark | capstone | 09) ;; *) die "--nodes: unknown node '$n' (kwok, kubemark, capstone, 09)" ;; esac
done
[[ "$(printf '%s\n' "${wanted[@]}" | sort | uniq -d)" == "" ]] || die "--nodes names a node twice: $nodes"
want() { [[ ",$nodes," == *",$1,"* ]]; }
command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"
[[ "$(id -u)" == 0 ]] || echo "warning: not root: the capstone runs without its pod network (the figure the issue asks for is as root)" >&2

"$REPO_ROOT/scripts/build-control-plane.sh" >/dev/null
if want kwok || want kubemark; then "$REPO_ROOT/scripts/build-bench-nodes.sh" >/dev/null; fi

# The work directory, a control plane on ports of its own (and the nodes'
# ports), and the trap that stops and removes all of it.
REALNODE_PORTS=3 realnode::init startup-bench
work="$REALNODE_WORK" pids=()
kwok_port="${OWN_PORTS[0]}" kubemark_port="${OWN_PORTS[1]}" capstone_port="${OWN_PORTS[2]}"

say "building the nodes and the measuring helper"
go build -o "$work/capstone-bench" ./scripts/capstone-bench
want capstone && go build -o "$work/mykubelet" ./chapters/13-mykubelet
if want 09; then
  go build -o "$work/03-tls-bootstrap" ./chapters/03-tls-bootstrap
  go build -o "$work/09-sync-pod" ./chapters/09-sync-pod
fi

# The pods' token volumes need the default ServiceAccount: cluster_up
# waits for it.
realnode::cluster_up
apiserver_pid="$(head -n 1 "$MYKUBELET_STATE_DIR/cluster/run/kube-apiserver.pid")" # its pid, then its binary
kill -0 "$apiserver_pid" 2>/dev/null || die "no kube-apiserver process $apiserver_pid"

# Every node but KWOK's joins with a bootstrap token of its own, as a real
# node does, and then speaks with its own credentials (system:node:NAME).
issue=()
for n in kubemark capstone 09; do want "$n" && issue+=("bench-$n"); done
if ((${#issue[@]} > 0)); then
  realnode::issue "${issue[@]}"
fi
bootstrap() { realnode::bootstrap "bench-$1"; }
declare -A node_arg
start_node() { # LABEL LOG COMMAND…: starts a node's process, remembers it
  local label="$1" log="$2"
  shift 2
  "$@" >"$log" 2>&1 &
  pids+=($!)
  realnode::adopt $!
  node_arg[$label]="$label=bench-$label:$!"
}

if want kwok; then
  say "KWOK: the Node bench-kwok, made by hand (KWOK registers none), and kwok for it"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: bench-kwok
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    type: kwok
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
YAML
  start_node kwok "$work/kwok.log" "$BIN_DIR/kwok" --kubeconfig "$KUBECONFIG" --config "$BIN_DIR/kwok-stages.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-ip 127.0.0.1 --node-lease-duration-seconds 40 --server-address "127.0.0.1:$kwok_port"
fi
if want kubemark; then
  say "upstream's kubelet as a kubemark hollow node (kubeAPIQPS/Burst 50/100, the real kubelet's defaults)"
  mkdir -p "$work/kubemark/tmp"
  start_node kubemark "$work/kubemark.log" env TMPDIR="$work/kubemark/tmp" "$BIN_DIR/kubemark" --morph=kubelet --name=bench-kubemark \
    --bootstrap-kubeconfig "$(bootstrap kubemark)" --kubeconfig "$work/kubemark/kubelet.kubeconfig" --cert-dir "$work/kubemark/pki" \
    --kubelet-port "$kubemark_port" --kubelet-read-only-port 0 --use-host-image-service=false \
    --kube-api-qps 50 --kube-api-burst 100 --max-pods 110
fi
if want capstone; then
  say "the capstone, mykubelet, its runtime in process"
  mkdir -p "$work/capstone" && chmod 0700 "$work/capstone"
  # The course's configuration, with a cluster DNS address as every real
  # cluster has: without one, each ClusterFirst pod gets upstream's
  # MissingClusterDNS warning on every sync (a POST, then PATCHes).
  { cat yaml/kubelet-config.yaml; printf 'clusterDNS: ["10.96.0.10"]\nclusterDomain: cluster.local\n'; } >"$work/capstone/config.yaml"
  start_node capstone "$work/capstone.log" "$work/mykubelet" --config "$work/capstone/config.yaml" --hostname-override bench-capstone --node-ip 127.0.0.1 --max-pods 110 \
    --bootstrap-kubeconfig "$(bootstrap capstone)" --kubeconfig "$work/capstone/kubelet.kubeconfig" --cert-dir "$work/capstone/pki" \
    --state-dir "$work/capstone" --root-dir "$work/capstone" --port "$capstone_port" --address 127.0.0.1 \
    --container-runtime-endpoint "unix://$work/capstone/rt.sock"
fi
if want 09; then
  say "chapter 09, bootstrapped by chapter 03"
  mkdir -p "$work/09" && chmod 0700 "$work/09"
  "$work/03-tls-bootstrap" --bootstrap-kubeconfig "$(bootstrap 09)" --node-name bench-09 --state-dir "$work/09" >"$work/03.log" 2>&1 ||
    die "chapter 03 failed: $(tail -n 1 "$work/03.log")"
  start_node 09 "$work/09.log" "$work/09-sync-pod" --state-dir "$work/09" --node-ip 127.0.0.1 --max-pods 110
fi

# Serving certificates are approved by hand upstream; the capstone's
# /metrics (read below through the API server) needs one.
realnode::approve_serving_csrs
for n in "${wanted[@]}"; do
  for _ in $(seq 240); do
    kubectl wait --for=condition=Ready "node/bench-$n" --timeout=1s >/dev/null 2>&1 && break
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || die "a node's process ($p) exited"; done
    sleep 0.5
  done
  kubectl wait --for=condition=Ready "node/bench-$n" --timeout=1s >/dev/null || die "node bench-$n not Ready within 2 minutes"
done
say "nodes Ready: ${wanted[*]}; $rounds measured rounds of $pods pods each, after a warm-up"
args=()
for n in "${wanted[@]}"; do args+=(--node "${node_arg[$n]}"); done
"$work/capstone-bench" compare --pods "$pods" --rounds "$rounds" --apiserver-pid "$apiserver_pid" "${args[@]}"

if want capstone; then
  echo
  echo "the capstone's own histogram, kubelet_pod_start_sli_duration_seconds (every pod it started, warm-up included):"
  # Straight from its server, as an admin: the API server refuses to
  # proxy to a node whose address is loopback.
  if metrics="$(kubectl --server "https://127.0.0.1:$capstone_port" get --raw /metrics 2>&1)"; then
    awk '/^kubelet_pod_start_sli_duration_seconds_(count|sum)/ { print "  " $0 }
         /^kubelet_pod_start_sli_duration_seconds_bucket/ && /le="(0.5|1|2|3|4|5|6|8|10)"/ { print "  " $0 }' <<<"$metrics"
  else
    echo "  not readable: $(head -n 1 <<<"$metrics")"
  fi
fi
echo "load at the end: $(uptime)"
echo "CPU: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
