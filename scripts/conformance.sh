#!/usr/bin/env bash
# Upstream's node conformance on a real node (issue 42): the [NodeConformance]
# specs of k8s.io/kubernetes v1.37.1 (test/e2e/common/node, sig-node, and
# test/e2e/common/storage, sig-storage) run with ginkgo in parallel against
# chapter 19's capstone (chapters/13-mykubelet --fake-runtime=false) on
# containerd as the cluster's only node, or against upstream's kubelet on
# the same machine for the baseline. It prints passed/failed/skipped, the
# time taken and the failures by kind (scripts/conformance report), and leaves the
# ginkgo JSON report and the node's logs in
# $MYKUBELET_STATE_DIR/conformance/RUN/ (default .state/conformance/RUN/).
# A benchmark, not part of scripts/test.sh; root only.
#
#   scripts/conformance.sh                       every [NodeConformance] spec, 4 processes (~25 min)
#   scripts/conformance.sh --short               a few specs of each kind, and three of --set conformance (CI)
#   scripts/conformance.sh --focus 'Security Context|Sysctls|Downward API'
#   scripts/conformance.sh --kubelet upstream    upstream's kubelet v1.37.1 instead
#   scripts/conformance.sh --procs 2 --timeout 90m --specs node
#   scripts/conformance.sh --set conformance     the certification set's other specs (below)
#   scripts/conformance.sh --build               only build what a run needs (scripts/tour.sh, first)
#   scripts/conformance.sh --slow --focus 'PLR Pod InPlace Resize'
#                                                the pod-level resize's specs, which are [Slow]
#
# Skipped always: [Serial], [Disruptive], [Flaky], [Feature:…]; [Slow]
# unless --slow.
#
# --set conformance: Kubernetes certifies a cluster with its [Conformance]
# specs, and some that need a kubelet are not [NodeConformance]. This set
# is the [Conformance] specs of test/e2e/common/node, common/storage, node
# and auth that are not [NodeConformance] (the default set, --set
# NodeConformance, has those): the pod's generation, in-place resize, pod
# certificates, ClusterTrustBundles, service account tokens, the CSR API,
# prestop, a pod's QoS class, a node's lifecycle (--specs does not apply).
# Of its 60 specs, six cannot pass on this machine for either kubelet
# (chapter 19's README has the figures):
#   - "Secrets/ConfigMaps should be consumable as environment variable
#     names … with various prefixes" (2): Debian's busybox sh, in the
#     offline image, drops a variable whose name is no shell name;
#   - "Pods should run through the lifecycle of Pods and PodStatus": its
#     image, agnhost:2.55, is not built offline (no registry);
#   - the image volume's spec with pullPolicy Always: no registry;
#   - the pod certificate mTLS spec: the e2e framework finds no pod fixture
#     for restricted/v0.0;
#   - "ServiceAccountIssuerDiscovery should support OIDC discovery": its
#     validator pod exits 1 under either kubelet (not looked into).
#
# Built once into $MYKUBELET_CACHE_DIR/conformance-v1.37.1/ from the module
# scripts/tools/conformance (like the control plane, a stamp of its go.mod,
# go.sum and sources says when to build again): e2e.test (`go test -c` of
# ./e2e, the specs and the e2e framework's flags), the ginkgo CLI (its
# version from the module graph), and the static programs of the e2e images
# (agnhost, nnp, and scripts/tools/images/curl: the options of curl the
# specs use). The images are built offline (scripts/containerd.sh images
# --e2e, scripts/tools/images) under the names the specs ask for: agnhost
# 2.66.1 (a static agnhost with busybox's applets and our curl beside it,
# and a certificate for localhost), busybox
# 1.37.0-2 (and, from the same glibc busybox, glibc-dns-testing 2.1.1),
# nonroot 1.5, nonewprivs 1.4, pause 3.10.2. The others cannot be
# built here (below); the specs that need them fail for that reason.
#
# Everything else is its own and removed at the end (scripts/realnode.sh,
# as for scripts/realnode-bench.sh): a control plane on free ports, containerd with
# a CNI bridge mkconf0 on 10.26.0.0/16 (traffic stays on loopback and that
# bridge), the cgroup root /mykubelet-conformance, the node's bootstrap
# token. The capstone's node address is 127.0.0.1. Upstream's kubelet
# refuses a loopback node IP: it gets the bridge's address, 10.26.0.1,
# which the API server dials for exec and logs; it runs in a mount
# namespace of its own for its kernel values (scripts/upstream-kubelet.sh)
# with its root dir a shared mount, so that the volumes it mounts (the
# service-account token, secrets, configMaps) reach containerd.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/realnode.sh
source "$REPO_ROOT/scripts/realnode.sh"
cd "$REPO_ROOT"

# The images the specs ask for that are not built offline here: their
# specs fail with ErrImagePull/ImagePullBackOff (some expect a failed pull:
# the invalid and the private registry's).
UNBUILT_IMAGES=(
  registry.k8s.io/e2e-test-images/nginx:1.27.0-2
  registry.k8s.io/e2e-test-images/agnhost:2.55
  registry.k8s.io/e2e-test-images/kitten:1.8
  registry.k8s.io/e2e-test-images/volume/nfs:1.6.0
)

# --short: a few specs of each kind the issue names (security context,
# sysctls, admission, environment, volumes, probes and hooks, /etc/hosts,
# the container runtime's basics); and three of the certification set's
# (--set conformance) that are not [NodeConformance]: a ClusterTrustBundle
# volume, a pod certificate volume, an in-place resize (SHORT_CONFORMANCE).
SHORT_CONFORMANCE='should be able to mount a single ClusterTrustBundle by name|should honor UserAnnotations for SPIFFE URI path|Pod InPlace Resize Container resize pod via the replace endpoint'
SHORT_FOCUS=''
for p in \
  'runAsUser should run the container with uid 65534' \
  'readonly rootfs when readOnlyRootFilesystem=true' \
  'should not allow privilege escalation when false' \
  'Sysctls \[LinuxOnly\] should support sysctls \[' \
  'should not launch unsafe, but not explicitly enabled sysctls' \
  'PodOSRejection' \
  'ConfigMap should be consumable via environment variable' \
  'Downward API should provide default limits.cpu/memory from node allocatable' \
  'Downward API should provide pod name, namespace and IP address as env vars' \
  'EmptyDir volumes should support \(root,0644,tmpfs\)' \
  'new files should be created with FSGroup ownership when container is non-root' \
  'Secrets should be consumable from pods in volume \[' \
  'Probing container with readiness probe should not be ready before initial delay' \
  'should execute poststart http hook properly' \
  'should execute poststart exec hook properly' \
  'should execute prestop https hook properly' \
  'Probing container should be restarted with a exec "cat /tmp/health" liveness probe' \
  'KubeletManagedEtcHosts' \
  'override the image.s default command \(container entrypoint\)' \
  'busybox command in a pod should print the output to logs' \
  'should support remote command execution over websockets' \
  'a pod with only hostnameOverride field will have hostnameOverride as hostname' \
  'should restart container on container-level restart policy Never' \
  'should provide host IP and pod IP as an env var if pod uses host network'; do
  SHORT_FOCUS+="${SHORT_FOCUS:+|}$p"
done

usage="usage: scripts/conformance.sh [--kubelet capstone|upstream] [--set NodeConformance|conformance] [--focus REGEX] [--short] [--slow] [--procs N] [--timeout DURATION] [--specs all|node|storage] [--build]"
kubelet=capstone set=NodeConformance focus="" short=false slow=false procs=4 timeout="" specs=all build=false
parse_flags "$usage" "--kubelet --set --focus --procs --timeout --specs" "--short --slow --build" "$@"
case "$set" in NodeConformance) ;; conformance)
  [[ "$specs" == all ]] || die "--specs is for the NodeConformance set: --set conformance runs its four directories"
  $short && die "--short is a subset of the NodeConformance set; for a few of --set conformance, give --focus" ;;
*) die "--set is NodeConformance or conformance (got '$set')" ;; esac
case "$kubelet" in capstone | upstream) ;; *) die "--kubelet is capstone or upstream (got '$kubelet')" ;; esac
case "$specs" in all) focus_file="" ;; node) focus_file=common/node/ ;; storage) focus_file=common/storage/ ;;
  *) die "--specs is all, node or storage (got '$specs')" ;; esac
whole_numbers procs
((procs <= 16)) || die "--procs ($procs) is above 16; the node runs every process's pods"
if [[ -z "$timeout" ]]; then if $short; then timeout=20m; else timeout=60m; fi; fi
[[ "$timeout" =~ ^[1-9][0-9]*(s|m|h)$ ]] || die "--timeout is a duration such as 45m or 2h (got '$timeout')"
if [[ -n "$focus" ]]; then
  rc=0
  grep -E -- "$focus" </dev/null >/dev/null 2>&1 || rc=$?
  ((rc != 2)) || die "--focus '$focus' is not a regular expression"
fi
command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"

CONF_DIR="$CACHE_DIR/conformance-$KUBE_VERSION"
CONF_MODULE="$REPO_ROOT/scripts/tools/conformance"

# build_conformance: e2e.test, ginkgo, agnhost, nnp and our curl (for the
# agnhost image) into $CONF_DIR, once
# (the e2e framework shares most packages with the control plane: minutes
# with its build cache warm, more without).
build_conformance() {
  local stamp_want agn_ldflags="-s -w -X main.Version=2.66.1" started
  stamp_want="$(printf '%s\n' "CGO_ENABLED=0 go test -c -trimpath" "$agn_ldflags" |
    cat - "$CONF_MODULE/go.mod" "$CONF_MODULE/go.sum" "$CONF_MODULE"/e2e/*.go "$REPO_ROOT"/scripts/tools/images/curl/*.go | sha256sum | cut -c1-16)"
  if [[ -x "$CONF_DIR/e2e.test" && -x "$CONF_DIR/ginkgo" && -x "$CONF_DIR/agnhost" && -x "$CONF_DIR/nnp" && -x "$CONF_DIR/curl" &&
    "$(cat "$CONF_DIR/.build-stamp" 2>/dev/null)" == "$stamp_want" ]]; then
    return 0
  fi
  say "building upstream's e2e specs, ginkgo and the images' programs into $CONF_DIR (once; minutes on 2 cores)"
  mkdir -p "$CONF_DIR"
  started=$SECONDS
  (cd "$CONF_MODULE" &&
    CGO_ENABLED=0 go_progress e2e.test test -c -trimpath -o "$CONF_DIR/e2e.test" ./e2e &&
    CGO_ENABLED=0 go_progress ginkgo build -v -trimpath -o "$CONF_DIR/ginkgo" github.com/onsi/ginkgo/v2/ginkgo &&
    CGO_ENABLED=0 go_progress agnhost build -v -trimpath -ldflags "$agn_ldflags" -o "$CONF_DIR/agnhost" k8s.io/kubernetes/test/images/agnhost &&
    CGO_ENABLED=0 go_progress nnp build -v -trimpath -ldflags "-s -w" -o "$CONF_DIR/nnp" k8s.io/kubernetes/test/images/nonewprivs &&
    cd "$REPO_ROOT/scripts/tools/images" &&
    CGO_ENABLED=0 go_progress curl build -v -trimpath -ldflags "-s -w" -o "$CONF_DIR/curl" ./curl) ||
    die "building the conformance binaries failed (see the go output above)"
  echo "$stamp_want" >"$CONF_DIR/.build-stamp"
  say "built in $((SECONDS - started)) s"
}

"$REPO_ROOT/scripts/build-control-plane.sh" >/dev/null
build_conformance
[[ "$kubelet" == upstream ]] && build_upstream_kubelet
if $build; then
  say "built: $CONF_DIR"
  exit 0
fi
[[ $EUID -eq 0 ]] || die "scripts/conformance.sh must run as root (containerd, runc, cgroups)"
command -v unshare >/dev/null || die "unshare (util-linux) is not installed"

run_name="$(date -u +%Y%m%dT%H%M%SZ)-$kubelet"
report_dir="$STATE_DIR/conformance/$run_name"
mkdir -p "$report_dir"
node="conformance-$kubelet"
REALNODE_REPORT_DIR="$report_dir"
realnode::init conformance mkconf0 10.26.0.0/16 /mykubelet-conformance
bridge_ip=10.26.0.1 # the bridge's own address (scripts/containerd.sh gives it the subnet's first)
# Both kubelets' hard eviction thresholds below the defaults (10% of the
# node's filesystem, 15% of the image filesystem): a shared machine's disk
# with less free would taint the node disk-pressure and no spec would run.
# No eviction and no image garbage collection for a full disk: this
# machine's disk is over the kubelets' default 85% (as (capacity -
# available) / capacity counts it), and the image GC of both kubelets would
# remove the images the specs use, the pause image too (containerd 1.6 pins
# none), every 5 minutes.
EVICTION_HARD='evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%, nodefs.inodesFree: 2%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99'

if [[ "$kubelet" == capstone ]]; then
  say "building the capstone"
  go build -o "$REALNODE_WORK/mykubelet" ./chapters/13-mykubelet
fi
realnode::up --e2e "$CONF_DIR"
realnode::issue "$node"
realnode::approve_serving_csrs

start_capstone() {
  realnode::capstone_config "$EVICTION_HARD"
  realnode::start_capstone "$node" 127.0.0.1
}

start_upstream() {
  realnode::upstream_config "$bridge_ip" "serverTLSBootstrap: true
$EVICTION_HARD"
  realnode::start_upstream "$node" "$bridge_ip" --shared-root
}

say "$kubelet: starting it on containerd, waiting for node $node to be Ready"
"start_$kubelet"
realnode::wait_ready "$node"
# exec and logs go through the kubelet's serving certificate: wait for it.
for _ in $(seq 60); do
  [[ -z "$(realnode::serving_csrs | awk 'NF == 1')" ]] && break
  sleep 1
done

skip='\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Feature:'
$slow || skip+='|\[Slow\]'
ginkgo_args=(-p --procs "$procs" --timeout "$timeout" --skip "$skip"
  --json-report report.json --junit-report junit.xml --output-dir "$report_dir" --no-color --silence-skips)
extra="$focus"
if $short; then extra="${extra:+($extra)|}$SHORT_FOCUS"; fi
# One --focus is the spec's text; more are OR-ed: an extra focus goes with
# the label filter instead, which ginkgo ANDs with it.
if [[ "$set" == conformance ]]; then
  # Ginkgo ORs the --focus-file flags, and ANDs them with the labels.
  ginkgo_args+=(--label-filter 'Conformance && !NodeConformance')
  for d in common/node common/storage node auth; do ginkgo_args+=(--focus-file "test/e2e/$d/"); done
  [[ -n "$extra" ]] && ginkgo_args+=(--focus "$extra")
elif $short; then
  # The short subset is of both sets: their labels OR-ed, each with its
  # patterns.
  ginkgo_args+=(--label-filter 'NodeConformance || Conformance' --focus "${focus:+($focus)|}$SHORT_FOCUS|$SHORT_CONFORMANCE")
elif [[ -n "$extra" ]]; then
  ginkgo_args+=(--label-filter NodeConformance --focus "$extra")
else
  ginkgo_args+=(--focus '\[NodeConformance\]')
fi
[[ -n "$focus_file" ]] && ginkgo_args+=(--focus-file "$focus_file")
e2e_args=(--kubeconfig "$KUBECONFIG" --provider local --kubectl-path "$BIN_DIR/kubectl" --report-dir "$report_dir")

load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
what="[NodeConformance]"
[[ "$set" == conformance ]] && what="[Conformance] but not [NodeConformance], of test/e2e/{common/node,common/storage,node,auth}"
$short && what+=" of the --short subset, with three [Conformance] specs of the other set"
[[ -n "$focus" ]] && what+=" and /$focus/"
say "ginkgo: $procs processes, $what${focus_file:+ in $focus_file}, at most $timeout (report: $report_dir)"
started=$SECONDS
set +e
(cd "$report_dir" && "$CONF_DIR/ginkgo" "${ginkgo_args[@]}" "$CONF_DIR/e2e.test" -- "${e2e_args[@]}") >"$report_dir/ginkgo.log" 2>&1
ginkgo_rc=$?
set -e
took=$((SECONDS - started))
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

report="$report_dir/report.json"
[[ -s "$report" ]] || die "ginkgo wrote no report (exit $ginkgo_rc): $(tail -n 5 "$report_dir/ginkgo.log")"
echo
echo "$kubelet on containerd $(crictl version 2>/dev/null | awk '/RuntimeVersion/ { print $2 }'), $procs ginkgo processes, $((took / 60)) min $((took % 60)) s (ginkgo exit $ginkgo_rc)"
echo "load at the start: $load_start; at the end: $load_end; CPU: $(nproc) cores"
echo "images not built offline (their specs fail to pull): ${UNBUILT_IMAGES[*]##*/}"
echo
go run ./scripts/conformance report --label "$kubelet" "$report"
echo
echo "report: $report (ginkgo's log: $report_dir/ginkgo.log, the kubelet's: $report_dir/kubelet.log)"
# The full run is a measurement: it prints and succeeds. The --short
# subset is a check (CI): every spec of it passes, or it fails.
if $short && ((ginkgo_rc != 0)); then
  die "the --short subset did not pass (ginkgo exit $ginkgo_rc)"
fi
