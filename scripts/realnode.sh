# shellcheck shell=bash
# The nodes the scripts that measure set up (scripts/conformance.sh and
# every bench), and the tests' containerd (scripts/testkit/testcontainerd;
# chapter 19's test's control plane, token and approval too), set up once
# here, as upstream's hack/lib/etcd.sh sets up etcd: a control plane of its
# own on free ports, containerd with a CNI bridge and the offline images, a
# cgroup root in every hierarchy, bootstrap tokens, the approval of the
# serving certificates' CSRs, the start of either kubelet on containerd (the
# capstone or upstream's) and
# the wait for its node to be Ready. A bench of the mock runtime takes the
# control plane, the tokens and the approval only, and hands over the
# nodes it starts itself. It owns what it starts: realnode::init installs
# the EXIT trap (realnode::cleanup) that stops the kubelet and every node
# handed over, the approver, containerd and the control plane, removes the
# cgroup root and the mounts, and deletes its work directory. Source it
# after scripts/lib.sh; do not run it.
#
#   realnode::init NAME [BRIDGE SUBNET CGROUP_ROOT]  the work directory, the environment, the trap
#   realnode::up [--e2e DIR]                        realnode::cluster_up, then realnode::containerd_up
#   realnode::cluster_up                            the control plane, until the default ServiceAccount exists
#   realnode::containerd_up [--e2e DIR]             containerd, its images, the cgroup root
#   realnode::issue NODE...                         a bootstrap token per node (realnode::bootstrap NODE: its kubeconfig)
#   realnode::approve_serving_csrs                  in the background, until the end
#   realnode::capstone_config [LINES]               $REALNODE_WORK/capstone/config.yaml; then
#   realnode::start_capstone NODE NODE_IP           (its command line: realnode::capstone_args NODE NODE_IP)
#   realnode::upstream_config ADDRESS [LINES]       $REALNODE_WORK/upstream/config.yaml; then
#   realnode::start_upstream NODE NODE_IP [--shared-root]
#   realnode::started PID NAME                      PID is the kubelet now (its log: $REALNODE_WORK/NAME.log)
#   realnode::adopt PID...                          more nodes' processes, stopped at the end as the kubelet is
#   realnode::wait_ready NODE                       Ready within 2 minutes, or the kubelet's last lines
#   realnode::stop_kubelet                          Ctrl-C, 30 s, then SIGKILL
#
# What it sets: REALNODE_WORK (0700, under /tmp), REALNODE_KUBELET_PORT
# (the first of OWN_PORTS: REALNODE_PORTS free ports besides the control
# plane's, 1 unless the caller sets it), REALNODE_SOCK (containerd's
# socket), REALNODE_CONTAINERD_PID,
# REALNODE_KUBELET_PID and REALNODE_KUBELET (capstone or upstream) while
# one runs; REALNODE_REPORT_DIR, when the caller sets it, gets the
# kubelet's and containerd's logs at the end.

# shellcheck source=scripts/upstream-kubelet.sh
source "$REPO_ROOT/scripts/upstream-kubelet.sh"

kubectl() { "$BIN_DIR/kubectl" "$@"; }
crictl() { "$CACHE_DIR/crictl-v1.37.0/bin/crictl" --runtime-endpoint "unix://$REALNODE_SOCK" --image-endpoint "unix://$REALNODE_SOCK" "$@"; }

REALNODE_KUBELET_PID="" REALNODE_KUBELET="" REALNODE_REPORT_DIR="${REALNODE_REPORT_DIR:-}"
realnode_cluster_up=false realnode_containerd_up=false realnode_shared_root="" realnode_approver=""
realnode_cg_dirs=() realnode_adopted=()

# realnode::init NAME [BRIDGE SUBNET CGROUP_ROOT]: the work directory
# /tmp/NAME.XXXXXX, the state of the control plane and containerd in it,
# containerd's CNI bridge BRIDGE on SUBNET (its first address is the
# bridge's), both kubelets' kubepods under CGROUP_ROOT (none of the three
# for a bench of the mock runtime), free ports, and the EXIT trap.
realnode::init() {
  REALNODE_WORK="$(mktemp -d "/tmp/$1.XXXXXX")"
  chmod 0700 "$REALNODE_WORK"
  export MYKUBELET_STATE_DIR="$REALNODE_WORK/state" KUBECONFIG="$REALNODE_WORK/state/cluster/admin.kubeconfig"
  if (($# > 1)); then
    export MYKUBELET_CNI_BRIDGE="$2" MYKUBELET_CNI_SUBNET="$3"
    REALNODE_CG_ROOT="$4"
  fi
  REALNODE_SOCK="$REALNODE_WORK/state/containerd/containerd.sock"
  trap realnode::cleanup EXIT
  own_control_plane_ports "${REALNODE_PORTS:-1}"
  REALNODE_KUBELET_PORT="${OWN_PORTS[0]}"
}

# realnode::up [--e2e DIR]: realnode::cluster_up and realnode::containerd_up.
realnode::up() {
  realnode::cluster_up
  realnode::containerd_up "$@"
}

# realnode::cluster_up: the control plane, until the default
# ServiceAccount exists (the pods' token volumes need it).
realnode::cluster_up() {
  say "a local control plane of its own on 127.0.0.1:$MYKUBELET_APISERVER_PORT"
  realnode_cluster_up=true
  "$REPO_ROOT/scripts/cluster.sh" up >"$REALNODE_WORK/cluster.log" 2>&1 || die "scripts/cluster.sh up failed (see above)"
  for _ in $(seq 120); do kubectl get serviceaccount default >/dev/null 2>&1 && break; sleep 0.5; done
  kubectl get serviceaccount default >/dev/null || die "no ServiceAccount default/default after 60 s"
}

# realnode::containerd_up [--e2e DIR]: containerd with the offline images
# (and the e2e specs' with --e2e), the cgroup root in every hierarchy.
realnode::containerd_up() {
  local mp
  [[ -n "${REALNODE_CG_ROOT:-}" ]] || die "realnode::init was given no bridge, subnet and cgroup root for containerd"
  say "containerd of its own (bridge $MYKUBELET_CNI_BRIDGE, $MYKUBELET_CNI_SUBNET) and the offline images${1:+, the e2e ones too}"
  realnode_containerd_up=true
  "$REPO_ROOT/scripts/containerd.sh" up >"$REALNODE_WORK/containerd-up.log" 2>&1 ||
    die "scripts/containerd.sh up failed: $(tail -n 3 "$REALNODE_WORK/containerd-up.log")"
  "$REPO_ROOT/scripts/containerd.sh" images "$@" >"$REALNODE_WORK/containerd-images.log" 2>&1 ||
    die "scripts/containerd.sh images failed: $(tail -n 3 "$REALNODE_WORK/containerd-images.log")"
  # shellcheck disable=SC2034 # read by the scripts that source this file
  REALNODE_CONTAINERD_PID="$(cat "$REALNODE_WORK/state/containerd/containerd.pid")"

  while read -r mp; do
    mkdir -p "$mp$REALNODE_CG_ROOT" && realnode_cg_dirs+=("$mp$REALNODE_CG_ROOT")
  done < <(awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo)
  ((${#realnode_cg_dirs[@]} > 0)) || die "no cgroup filesystem is mounted"
}

# realnode::issue NODE...: a bootstrap token and kubeconfig per node
# (scripts/classroom issue); realnode::bootstrap NODE prints its path.
realnode::issue() {
  (cd "$REPO_ROOT" && go run ./scripts/classroom --state-dir "$REALNODE_WORK" issue "$@" >/dev/null)
}
realnode::bootstrap() { echo "$REALNODE_WORK/classroom/$1/bootstrap-kubelet.kubeconfig"; }

# realnode::serving_csrs: the kubernetes.io/kubelet-serving CSRs, a line
# each: the name, then the first condition's type (none: pending).
realnode::serving_csrs() {
  kubectl get csr -o jsonpath='{range .items[?(@.spec.signerName=="kubernetes.io/kubelet-serving")]}{.metadata.name} {.status.conditions[0].type}{"\n"}{end}'
}

# realnode::approve_serving_csrs: approves every pending serving CSR, each
# second, until the end, as an admin does by hand in chapter 13: the API
# server checks the kubelet's serving certificate against the cluster CA.
realnode::approve_serving_csrs() {
  (while sleep 1; do
    realnode::serving_csrs 2>/dev/null |
      awk 'NF == 1 { print $1 }' | while read -r csr; do kubectl certificate approve "$csr" >/dev/null 2>&1 || true; done
  done) &
  realnode_approver=$!
}

# realnode::capstone_config [LINES]: the capstone's root directory
# $REALNODE_WORK/capstone and its config.yaml: yaml/kubelet-config.yaml,
# the cgroup root, the cluster DNS, then LINES.
realnode::capstone_config() {
  local d="$REALNODE_WORK/capstone"
  mkdir -m 0700 "$d"
  { cat "$REPO_ROOT/yaml/kubelet-config.yaml"
    printf 'cgroupRoot: %s\nclusterDNS: ["10.96.0.10"]\nclusterDomain: cluster.local\n' "$REALNODE_CG_ROOT"
    [[ -z "${1:-}" ]] || echo "$1"; } >"$d/config.yaml"
}

# realnode::capstone_args NODE NODE_IP: the capstone's command line on
# containerd as NODE, an argument a line, with realnode::capstone_config's
# directory: what realnode::start_capstone runs, and what a Go test that
# reads the kubelet's output runs itself (scripts/testkit/testcontainerd).
realnode::capstone_args() {
  local d="$REALNODE_WORK/capstone"
  printf '%s\n' --config "$d/config.yaml" --hostname-override "$1" --port "$REALNODE_KUBELET_PORT" --node-ip "$2" \
    --bootstrap-kubeconfig "$(realnode::bootstrap "$1")" --kubeconfig "$d/kubelet.kubeconfig" --cert-dir "$d/pki" \
    --state-dir "$d" --root-dir "$d" \
    --fake-runtime=false --container-runtime-endpoint "unix://$REALNODE_SOCK"
}

# realnode::start_capstone NODE NODE_IP: the capstone (chapters/13-mykubelet,
# built into the work directory) with realnode::capstone_args, in the
# background; its output goes to $REALNODE_WORK/capstone.log.
realnode::start_capstone() {
  local args
  mapfile -t args < <(realnode::capstone_args "$1" "$2")
  [[ -x "$REALNODE_WORK/mykubelet" ]] || (cd "$REPO_ROOT" && go build -o "$REALNODE_WORK/mykubelet" ./chapters/13-mykubelet)
  "$REALNODE_WORK/mykubelet" "${args[@]}" >"$REALNODE_WORK/capstone.log" 2>&1 &
  REALNODE_KUBELET_PID=$! REALNODE_KUBELET=capstone
}

# realnode::upstream_config ADDRESS [LINES]: upstream's kubelet's root
# directory $REALNODE_WORK/upstream and its config.yaml: serving on
# ADDRESS, on containerd, cgroupfs under the cgroup root, with what it needs
# to run on this machine (failCgroupV1 and failSwapOn false, no iptables
# chains, protectKernelDefaults: scripts/upstream-kubelet.sh), the client
# CA and webhook authorization as the capstone's, then LINES.
realnode::upstream_config() {
  local d="$REALNODE_WORK/upstream"
  mkdir -m 0700 "$d" "$d/logs"
  cat >"$d/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $1
port: $REALNODE_KUBELET_PORT
readOnlyPort: 0
healthzPort: 0
containerRuntimeEndpoint: unix://$REALNODE_SOCK
cgroupDriver: cgroupfs
cgroupRoot: $REALNODE_CG_ROOT
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
  x509: {clientCAFile: $REALNODE_WORK/state/cluster/pki/ca.crt}
authorization: {mode: Webhook}
YAML
  [[ -z "${2:-}" ]] || echo "$2" >>"$d/config.yaml"
}

# realnode::start_upstream NODE NODE_IP [--shared-root]: upstream's kubelet
# (scripts/upstream-kubelet.sh) as NODE, in the background, with
# realnode::upstream_config's directory; its output goes to
# $REALNODE_WORK/upstream.log. --shared-root shares the mounts under its
# root directory with containerd (the volumes reach the containers).
realnode::start_upstream() {
  local d="$REALNODE_WORK/upstream" shared=""
  [[ "${3:-}" == --shared-root ]] && shared="$d" realnode_shared_root="$d"
  start_upstream_kubelet "$REALNODE_WORK/sysctl" "$shared" "$REALNODE_WORK/upstream.log" \
    --config "$d/config.yaml" --hostname-override "$1" --node-ip "$2" \
    --bootstrap-kubeconfig "$(realnode::bootstrap "$1")" --kubeconfig "$d/kubelet.kubeconfig" --cert-dir "$d/pki" \
    --root-dir "$d"
  REALNODE_KUBELET_PID=$! REALNODE_KUBELET=upstream
}

# realnode::started PID NAME: PID, started by the caller, is the kubelet
# from now on (realnode::wait_ready, realnode::stop_kubelet, the cleanup),
# its log $REALNODE_WORK/NAME.log.
realnode::started() { REALNODE_KUBELET_PID="$1" REALNODE_KUBELET="$2"; }

# realnode::adopt PID...: more processes of nodes the caller started (a
# bench's several nodes), stopped at the end as the kubelet is.
realnode::adopt() { realnode_adopted+=("$@"); }

# realnode::wait_ready NODE: the node Ready within 2 minutes, or an error
# with the kubelet's last lines (at once if it exits).
realnode::wait_ready() {
  for _ in $(seq 240); do
    kubectl wait --for=condition=Ready "node/$1" --timeout=1s >/dev/null 2>&1 && return 0
    kill -0 "$REALNODE_KUBELET_PID" 2>/dev/null || die "$REALNODE_KUBELET exited: $(tail -n 3 "$REALNODE_WORK/$REALNODE_KUBELET.log")"
    sleep 0.5
  done
  kubectl wait --for=condition=Ready "node/$1" --timeout=1s >/dev/null || die "node $1 not Ready within 2 minutes"
}

# realnode::stop_kubelet: the running kubelet gets Ctrl-C (SIGINT), then
# SIGKILL after 30 s.
realnode::stop_kubelet() {
  [[ -n "$REALNODE_KUBELET_PID" ]] || return 0
  realnode_stop "$REALNODE_KUBELET_PID"
  REALNODE_KUBELET_PID=""
}

# realnode_stop PID...: Ctrl-C (SIGINT) to each, then SIGKILL to those
# still running after 30 s.
realnode_stop() {
  local p
  for p in "$@"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "$@"; do
    for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}

# realnode::cleanup, the EXIT trap: on failure the last lines of each log;
# then the approver, the kubelet, the nodes handed over, containerd, the control plane, the
# mounts, the cgroup root (once its pods' cgroups are empty) and the work
# directory.
realnode::cleanup() {
  local rc=$? d out
  set +e
  [[ -n "$realnode_approver" ]] && kill "$realnode_approver" 2>/dev/null
  realnode::stop_kubelet
  ((${#realnode_adopted[@]} == 0)) || realnode_stop "${realnode_adopted[@]}"
  if [[ -n "$REALNODE_REPORT_DIR" ]]; then
    [[ -n "$REALNODE_KUBELET" ]] && cp "$REALNODE_WORK/$REALNODE_KUBELET.log" "$REALNODE_REPORT_DIR/kubelet.log" 2>/dev/null
    cp "$REALNODE_WORK/state/containerd/containerd.log" "$REALNODE_REPORT_DIR/containerd.log" 2>/dev/null
  fi
  if [[ $rc -ne 0 ]]; then
    tail_logs "$REALNODE_WORK"
  fi
  if $realnode_containerd_up && ! out="$("$REPO_ROOT/scripts/containerd.sh" down 2>&1)"; then
    echo "warning: scripts/containerd.sh down failed: ${out##*$'\n'}" >&2
  fi
  $realnode_cluster_up && "$REPO_ROOT/scripts/cluster.sh" down >/dev/null 2>&1
  [[ -n "$realnode_shared_root" ]] && unmount_tree "$realnode_shared_root"
  # The cgroup root, deepest first.
  for d in "${realnode_cg_dirs[@]}"; do
    [[ -d "$d" ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    [[ -d "$d" ]] && echo "warning: $d is left (processes in it?)" >&2
  done
  umount "$REALNODE_WORK"/sysctl/* 2>/dev/null
  unmount_tree "$REALNODE_WORK"
  rm -rf "$REALNODE_WORK"
}
