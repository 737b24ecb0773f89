#!/usr/bin/env bash
# Pod startup on a real node (chapter 19): a burst of pods bound to the
# node, on containerd, for the capstone (chapters/13-mykubelet with
# --fake-runtime=false) and then for upstream's kubelet v1.37.1, one
# kubelet at a time on the same local control plane and the same
# containerd. It prints, per kubelet, the pods' startup latency (created ->
# Running, seen through a watch) p50/p90/p99/max, the time from the first
# create until every pod ran, and the CPU time per pod of the kubelet's
# process and of containerd's (/proc/PID/stat). The measuring half is
# scripts/realnode-bench (Go). It asserts nothing about time: quote the load
# it prints with the figures. Root only; not part of scripts/test.sh.
#
#   scripts/realnode-bench.sh                  100 pods, 2 measured bursts each, after a 10-pod warm-up
#   scripts/realnode-bench.sh --pods 50 --rounds 3 --warm-up 0
#   scripts/realnode-bench.sh --kubelets upstream
#   scripts/realnode-bench.sh --short          a smoke run: 5 pods, one burst, no warm-up
#
# Everything is its own: a control plane on free ports, containerd
# (scripts/containerd.sh, Debian's 1.6 unless MYKUBELET_CONTAINERD=v2) with
# its state, a CNI bridge mkbench0 on 10.24.0.0/16, the offline images, and
# the cgroup root /mykubelet-bench (in every cgroup hierarchy) for both
# kubelets' kubepods, so that neither touches the machine's /kubepods. All
# of it is removed at the end.
#
# Upstream's kubelet is built once (scripts/upstream-kubelet.sh). What it
# needs to run here, and why:
#   - cgroupDriver cgroupfs, failCgroupV1 false (this machine has cgroup v1),
#     failSwapOn false, makeIPTablesUtilChains false (no iptables chains on
#     the machine), podLogsDir and --root-dir under the bench's directory.
#   - a node IP that is not loopback: it refuses one ("nodeIP can't be
#     loopback address") and one not on an interface. It gets the CNI
#     bridge's address (10.24.0.1), on the bridge this script makes and
#     removes; nothing is sent to it (the pods need no logs, exec or probes).
#   - the kernel settings it asks for (vm.overcommit_memory 1, kernel.panic
#     10, kernel.panic_on_oops 1, …): without protectKernelDefaults it sets
#     them for the whole machine, with it it refuses to start when they
#     differ. It runs with protectKernelDefaults in a mount namespace of its
#     own where those /proc/sys files are bind-mounted from files holding
#     its values: it reads what it wants and changes nothing. The price
#     here: mounts it makes are not seen by containerd, so the pods of both
#     kubelets mount no service-account token (automountServiceAccountToken
#     false). scripts/conformance.sh shares its root dir's mounts instead.
#   - its credentials as the capstone's: a bootstrap token of its own
#     (scripts/classroom issue), a client certificate through the CSR.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/upstream-kubelet.sh
source "$REPO_ROOT/scripts/upstream-kubelet.sh"
cd "$REPO_ROOT"

usage="usage: scripts/realnode-bench.sh [--pods N] [--rounds N] [--warm-up N] [--kubelets capstone,upstream] [--short]"
pods=100 rounds=2 warmup=10 kubelets="capstone,upstream"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pods | --rounds | --warm-up | --kubelets)
      [[ $# -ge 2 ]] || die "$1 needs a value ($usage)"
      case "$1" in
        --pods) pods="$2" ;;
        --rounds) rounds="$2" ;;
        --warm-up) warmup="$2" ;;
        --kubelets) kubelets="$2" ;;
      esac
      shift 2
      ;;
    --short) pods=5 rounds=1 warmup=0; shift ;;
    -h | --help) echo "$usage"; exit 0 ;;
    *) die "unknown argument '$1' ($usage)" ;;
  esac
done
for v in pods rounds; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "--$v is a whole number above 0 (got '${!v}')"
done
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warm-up is a whole number (got '$warmup')"
((pods <= 110)) || die "--pods ($pods) cannot be above 110, the nodes' maxPods"
IFS=, read -r -a wanted <<<"$kubelets"
((${#wanted[@]} > 0)) || die "--kubelets names no kubelet ($usage)"
for k in "${wanted[@]}"; do
  case "$k" in capstone | upstream) ;; *) die "--kubelets: unknown kubelet '$k' (capstone, upstream)" ;; esac
done
[[ "$(printf '%s\n' "${wanted[@]}" | sort | uniq -d)" == "" ]] || die "--kubelets names a kubelet twice: $kubelets"
[[ $EUID -eq 0 ]] || die "scripts/realnode-bench.sh must run as root (containerd, runc, cgroups)"
command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"
command -v unshare >/dev/null || die "unshare (util-linux) is not installed"

"$REPO_ROOT/scripts/build-control-plane.sh" >/dev/null
[[ ",$kubelets," == *",upstream,"* ]] && build_upstream_kubelet

work="$(mktemp -d /tmp/realnode-bench.XXXXXX)"
chmod 0700 "$work"
export MYKUBELET_STATE_DIR="$work/state" KUBECONFIG="$work/state/cluster/admin.kubeconfig"
export MYKUBELET_CNI_BRIDGE=mkbench0 MYKUBELET_CNI_SUBNET=10.24.0.0/16
node_ip=10.24.0.1 # the bridge's own address (scripts/containerd.sh gives it the subnet's first)
CG_ROOT=/mykubelet-bench
kubectl() { "$BIN_DIR/kubectl" "$@"; }
kubelet_pid="" cluster_up=false containerd_up=false
cg_dirs=()
stop_kubelet() {
  [[ -n "$kubelet_pid" ]] || return 0
  kill -INT "$kubelet_pid" 2>/dev/null || true
  for _ in $(seq 150); do kill -0 "$kubelet_pid" 2>/dev/null || break; sleep 0.2; done
  kill -KILL "$kubelet_pid" 2>/dev/null || true
  wait "$kubelet_pid" 2>/dev/null || true
  kubelet_pid=""
}
cleanup() {
  local rc=$? d
  set +e
  if [[ $rc -ne 0 ]]; then
    for f in "$work"/*.log; do
      [[ -s "$f" ]] || continue
      echo "--- the last lines of $(basename "$f"):" >&2
      tail -n 8 "$f" >&2
    done
  fi
  [[ -n "${approver:-}" ]] && kill "$approver" 2>/dev/null
  stop_kubelet
  $containerd_up && "$REPO_ROOT/scripts/containerd.sh" down >/dev/null 2>&1
  $cluster_up && "$REPO_ROOT/scripts/cluster.sh" down >/dev/null 2>&1
  # The cgroup root, once its pods' cgroups are empty: deepest first.
  for d in "${cg_dirs[@]}"; do
    [[ -d "$d" ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    [[ -d "$d" ]] && echo "warning: $d is left (processes in it?)" >&2
  done
  umount "$work"/sysctl/* 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

own_control_plane_ports 1
kubelet_port="${OWN_PORTS[0]}"

say "building the capstone and the measuring helper"
go build -o "$work/mykubelet" ./chapters/13-mykubelet
go build -o "$work/realnode-bench" ./scripts/realnode-bench

say "a local control plane of its own on 127.0.0.1:$MYKUBELET_APISERVER_PORT"
cluster_up=true
"$REPO_ROOT/scripts/cluster.sh" up >"$work/cluster.log" 2>&1 || die "scripts/cluster.sh up failed (see above)"
for _ in $(seq 120); do kubectl get serviceaccount default >/dev/null 2>&1 && break; sleep 0.5; done
kubectl get serviceaccount default >/dev/null || die "no ServiceAccount default/default after 60 s"

say "containerd of its own (bridge $MYKUBELET_CNI_BRIDGE, $MYKUBELET_CNI_SUBNET) and the offline images"
containerd_up=true
"$REPO_ROOT/scripts/containerd.sh" up >"$work/containerd-up.log" 2>&1 || die "scripts/containerd.sh up failed: $(tail -n 3 "$work/containerd-up.log")"
"$REPO_ROOT/scripts/containerd.sh" images >"$work/containerd-images.log" 2>&1 || die "scripts/containerd.sh images failed: $(tail -n 3 "$work/containerd-images.log")"
sock="$work/state/containerd/containerd.sock"
containerd_pid="$(cat "$work/state/containerd/containerd.pid")"
crictl() { "$CACHE_DIR/crictl-v1.37.0/bin/crictl" --runtime-endpoint "unix://$sock" --image-endpoint "unix://$sock" "$@"; }
containerd_version="$(crictl version 2>/dev/null | awk '/RuntimeVersion/ { print $2 }')"

# Both kubelets' kubepods under a root of their own, in every hierarchy.
while read -r mp; do
  mkdir -p "$mp$CG_ROOT" && cg_dirs+=("$mp$CG_ROOT")
done < <(awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo)
((${#cg_dirs[@]} > 0)) || die "no cgroup filesystem is mounted"

go run ./scripts/classroom --state-dir "$work" issue bench-capstone bench-upstream >/dev/null
bootstrap() { echo "$work/classroom/bench-$1/bootstrap-kubelet.kubeconfig"; }

# The capstone's serving certificate is approved by hand, as in chapter 13.
(while sleep 1; do
  kubectl get csr -o jsonpath='{range .items[?(@.spec.signerName=="kubernetes.io/kubelet-serving")]}{.metadata.name} {.status.conditions[0].type}{"\n"}{end}' 2>/dev/null |
    awk 'NF == 1 { print $1 }' | while read -r csr; do kubectl certificate approve "$csr" >/dev/null 2>&1 || true; done
done) &
approver=$!

start_capstone() {
  local d="$work/capstone"
  mkdir -m 0700 "$d"
  { cat yaml/kubelet-config.yaml; printf 'cgroupRoot: %s\nclusterDNS: ["10.96.0.10"]\nclusterDomain: cluster.local\n' "$CG_ROOT"; } >"$d/config.yaml"
  "$work/mykubelet" --config "$d/config.yaml" --hostname-override bench-capstone --port "$kubelet_port" \
    --bootstrap-kubeconfig "$(bootstrap capstone)" --kubeconfig "$d/kubelet.kubeconfig" --cert-dir "$d/pki" \
    --state-dir "$d" --root-dir "$d" \
    --fake-runtime=false --container-runtime-endpoint "unix://$sock" >"$work/capstone.log" 2>&1 &
  kubelet_pid=$!
}

start_upstream() {
  local d="$work/upstream" s="$work/sysctl"
  mkdir -m 0700 "$d" "$d/logs" "$s"
  cat >"$d/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzPort: 0
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
cgroupRoot: $CG_ROOT
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
protectKernelDefaults: true
podLogsDir: $d/logs
maxPods: 110
clusterDNS: ["10.96.0.10"]
clusterDomain: cluster.local
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $work/state/cluster/pki/ca.crt}
authorization: {mode: Webhook}
YAML
  start_upstream_kubelet "$s" "" "$work/upstream.log" \
    --config "$d/config.yaml" --hostname-override bench-upstream --node-ip "$node_ip" \
    --bootstrap-kubeconfig "$(bootstrap upstream)" --kubeconfig "$d/kubelet.kubeconfig" --cert-dir "$d/pki" \
    --root-dir "$d"
  kubelet_pid=$!
}

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
"$work/realnode-bench" --print-header >"$work/table"
for k in "${wanted[@]}"; do
  say "$k: starting it on containerd, waiting for node bench-$k to be Ready"
  "start_$k"
  for _ in $(seq 240); do
    kubectl wait --for=condition=Ready "node/bench-$k" --timeout=1s >/dev/null 2>&1 && break
    kill -0 "$kubelet_pid" 2>/dev/null || die "$k exited: $(tail -n 3 "$work/$k.log")"
    sleep 0.5
  done
  kubectl wait --for=condition=Ready "node/bench-$k" --timeout=1s >/dev/null || die "node bench-$k not Ready within 2 minutes"
  [[ "$(cat "/proc/$kubelet_pid/comm")" == kubelet || "$k" == capstone ]] || die "pid $kubelet_pid is $(cat "/proc/$kubelet_pid/comm"), not the kubelet"
  "$work/realnode-bench" --node "bench-$k" --label "$k" --kubelet-pid "$kubelet_pid" --containerd-pid "$containerd_pid" \
    --pods "$pods" --rounds "$rounds" --warm-up "$warmup" | tee "$work/$k.out"
  grep '^| ' "$work/$k.out" >>"$work/table"
  stop_kubelet
  # What the kubelet left in containerd (stopped sandboxes it had yet to
  # collect) goes before the next one starts.
  crictl rmp --all --force >/dev/null 2>&1 || true
  kubectl delete node "bench-$k" --wait=false >/dev/null 2>&1 || true
done

echo
echo "$pods pods per burst, $rounds measured bursts per kubelet (after a warm-up of $warmup), one kubelet at a time, on containerd $containerd_version:"
echo
cat "$work/table"
echo
echo "load at the start: $load_start; at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CPU: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
