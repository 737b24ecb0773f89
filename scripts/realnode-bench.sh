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
# shellcheck source=scripts/realnode.sh
source "$REPO_ROOT/scripts/realnode.sh"
cd "$REPO_ROOT"

usage="usage: scripts/realnode-bench.sh [--pods N] [--rounds N] [--warm-up N] [--kubelets capstone,upstream] [--short]"
unset pods rounds warm_up
kubelets="capstone,upstream" short=false
parse_flags "$usage" "--pods --rounds --warm-up --kubelets" "--short" "$@"
# --short: 5 pods, 1 round, no warm-up, unless a flag says otherwise.
if $short; then : "${pods=5}" "${rounds=1}" "${warm_up=0}"; fi
: "${pods=100}" "${rounds=2}" "${warm_up=10}"
whole_numbers pods rounds
[[ "$warm_up" =~ ^[0-9]+$ ]] || die "--warm-up is a whole number (got '$warm_up')"
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

realnode::init realnode-bench mkbench0 10.24.0.0/16 /mykubelet-bench
node_ip=10.24.0.1 # the bridge's own address (scripts/containerd.sh gives it the subnet's first)

say "building the capstone and the measuring helper"
go build -o "$REALNODE_WORK/mykubelet" ./chapters/13-mykubelet
go build -o "$REALNODE_WORK/realnode-bench" ./scripts/realnode-bench
# shellcheck disable=SC2119 # its arguments are optional: no e2e images
realnode::up
containerd_version="$(crictl version 2>/dev/null | awk '/RuntimeVersion/ { print $2 }')"
realnode::issue bench-capstone bench-upstream
# The capstone's serving certificate is approved by hand, as in chapter 13.
realnode::approve_serving_csrs

start_capstone() {
  # shellcheck disable=SC2119 # its argument is optional: no more lines
  realnode::capstone_config
  realnode::start_capstone bench-capstone 127.0.0.1
}

start_upstream() {
  realnode::upstream_config 127.0.0.1
  realnode::start_upstream bench-upstream "$node_ip"
}

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
"$REALNODE_WORK/realnode-bench" --print-header >"$REALNODE_WORK/table"
for k in "${wanted[@]}"; do
  say "$k: starting it on containerd, waiting for node bench-$k to be Ready"
  "start_$k"
  realnode::wait_ready "bench-$k"
  [[ "$(cat "/proc/$REALNODE_KUBELET_PID/comm")" == kubelet || "$k" == capstone ]] || die "pid $REALNODE_KUBELET_PID is $(cat "/proc/$REALNODE_KUBELET_PID/comm"), not the kubelet"
  "$REALNODE_WORK/realnode-bench" --node "bench-$k" --label "$k" --kubelet-pid "$REALNODE_KUBELET_PID" --containerd-pid "$REALNODE_CONTAINERD_PID" \
    --pods "$pods" --rounds "$rounds" --warm-up "$warm_up" | tee "$REALNODE_WORK/$k.out"
  grep '^| ' "$REALNODE_WORK/$k.out" >>"$REALNODE_WORK/table"
  realnode::stop_kubelet
  # What the kubelet left in containerd (stopped sandboxes it had yet to
  # collect) goes before the next one starts.
  crictl rmp --all --force >/dev/null 2>&1 || true
  kubectl delete node "bench-$k" --wait=false >/dev/null 2>&1 || true
done

echo
echo "$pods pods per burst, $rounds measured bursts per kubelet (after a warm-up of $warm_up), one kubelet at a time, on containerd $containerd_version:"
echo
cat "$REALNODE_WORK/table"
echo
echo "load at the start: $load_start; at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CPU: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
