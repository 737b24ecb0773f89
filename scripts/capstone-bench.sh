#!/usr/bin/env bash
# Figures of the capstone, mykubelet as one binary (chapters/13-mykubelet),
# on a fresh local control plane of its own (scripts/realnode.sh: free ports,
# a temporary state directory, all removed at the end). It prints; it
# asserts nothing about time. Run it on a quiet machine and quote the load
# it prints with the figures.
#
#   (a) from an empty state directory and a bootstrap token: seconds to a
#       Ready node, and to a Deployment of 10 replicas rolled out on it;
#   (b) pod startup latency of a burst of pods (SIG Scalability: created ->
#       all containers started, seen through a watch), p50/p90/p99;
#   (c) idle cost with --max-pods pods running: CPU, RSS, goroutines, and
#       the API writes per minute (the API server's apiserver_request_total,
#       less what the control plane writes by itself, measured first).
#
#   scripts/capstone-bench.sh                          builds ./chapters/13-mykubelet
#   scripts/capstone-bench.sh --binary /tmp/mykubelet  a binary built elsewhere
#   scripts/capstone-bench.sh --max-pods 30 --burst 30 --idle 60 --baseline 60
#
# A binary that cannot bootstrap itself (no --bootstrap-kubeconfig flag,
# e.g. chapter 12's) is bootstrapped by chapter 03 first, and that time
# counts. The mock runtime runs inside the binary (its default), so CPU
# and RSS include it.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/realnode.sh
source "$REPO_ROOT/scripts/realnode.sh"
cd "$REPO_ROOT"
export LC_ALL=C # sort and join agree on the order

usage="usage: scripts/capstone-bench.sh [--binary PATH] [--max-pods N] [--burst N] [--idle SECONDS] [--baseline SECONDS]"
binary="" max_pods=110 burst=100 idle=60 baseline=60
parse_flags "$usage" "--binary --max-pods --burst --idle --baseline" "" "$@"
whole_numbers max_pods burst idle baseline
((burst <= max_pods)) || die "--burst ($burst) cannot be above --max-pods ($max_pods): the node would reject the rest (OutOfpods)"
if [[ -n "$binary" ]]; then
  [[ -f "$binary" && -x "$binary" ]] || die "--binary $binary is not an executable file"
  binary="$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")"
else
  [[ -d chapters/13-mykubelet ]] || die "no chapters/13-mykubelet in this checkout: pass --binary PATH"
fi
command -v go >/dev/null || die "go is not installed (need Go 1.26; see README.md, Prerequisites)"
"$REPO_ROOT/scripts/build-control-plane.sh" >/dev/null

# The work directory, a control plane on ports of its own (and the node's
# port), and the trap that stops and removes all of it.
realnode::init capstone-bench
work="$REALNODE_WORK" kubelet_port="$REALNODE_KUBELET_PORT"

say "building (the node binary, chapter 03 if needed, the measuring helper)"
if [[ -z "$binary" ]]; then
  binary="$work/mykubelet"
  go build -o "$binary" ./chapters/13-mykubelet
fi
go build -o "$work/capstone-bench" ./scripts/capstone-bench
help="$("$binary" --help 2>&1 || true)"
has_flag() { grep -Eq -- "(^|[[:space:]])--?$1([[:space:]=]|$)" <<<"$help"; }
if ! has_flag bootstrap-kubeconfig; then
  go build -o "$work/03-tls-bootstrap" ./chapters/03-tls-bootstrap
fi

realnode::cluster_up
node=bench-node
realnode::issue "$node"
bootstrap_kubeconfig="$(realnode::bootstrap "$node")"
[[ -f "$bootstrap_kubeconfig" ]] || die "scripts/classroom wrote no $bootstrap_kubeconfig"
nodedir="$work/node"
mkdir -p "$nodedir" && chmod 0700 "$nodedir"

# The API server's write requests, by verb, resource and subresource.
writes() {
  kubectl get --raw /metrics | awk '
    /^apiserver_request_total\{/ && /verb="(POST|PUT|PATCH|DELETE|APPLY)"/ {
      match($0, /verb="[A-Z]+"/); verb = substr($0, RSTART + 6, RLENGTH - 7)
      match($0, /resource="[^"]*"/); res = substr($0, RSTART + 10, RLENGTH - 11)
      sub_ = ""; if (match($0, /subresource="[^"]+"/)) sub_ = "/" substr($0, RSTART + 13, RLENGTH - 14)
      n[verb "_" res sub_] += $NF
    }
    END { for (k in n) print k, n[k] }' | sort
}
# per_minute BEFORE AFTER SECONDS: the differences, per minute, one line each.
per_minute() {
  join -a 2 -e 0 -o 0,1.2,2.2 "$1" "$2" |
    awk -v s="$3" '{ d = ($3 - $2) * 60 / s; if (d > 0) printf "%s %.1f\n", $1, d }'
}

say "baseline: what the control plane writes by itself in ${baseline}s (no node yet)"
writes >"$work/w0"
sleep "$baseline"
writes >"$work/w1"
per_minute "$work/w0" "$work/w1" "$baseline" >"$work/base"

# Serving certificates are approved by hand upstream (no controller signs
# kubernetes.io/kubelet-serving by itself): approve the node's, as an admin.
realnode::approve_serving_csrs

args=(--node-ip 127.0.0.1 --max-pods "$max_pods")
if has_flag hostname-override; then args+=(--hostname-override "$node"); else args+=(--node-name "$node"); fi
has_flag bootstrap-kubeconfig && args+=(--bootstrap-kubeconfig "$bootstrap_kubeconfig" --kubeconfig "$nodedir/kubelet.kubeconfig" --cert-dir "$nodedir/pki")
has_flag state-dir && args+=(--state-dir "$nodedir")
has_flag root-dir && args+=(--root-dir "$nodedir")
has_flag port && args+=(--port "$kubelet_port")
has_flag debug-address && args+=(--debug-address 127.0.0.1:0)
has_flag container-runtime-endpoint && args+=(--container-runtime-endpoint "unix://$nodedir/rt.sock")
has_flag address && args+=(--address 127.0.0.1)
# A pod range of its own: two mock runtimes on one machine cannot route one.
has_flag pod-cidr && args+=(--pod-cidr 10.93.0.0/16)

say "(a) from an empty state directory and a bootstrap token: $(basename "$binary") ${args[*]}"
start=$(date +%s.%N)
if ! has_flag bootstrap-kubeconfig; then
  "$work/03-tls-bootstrap" --bootstrap-kubeconfig "$bootstrap_kubeconfig" --node-name "$node" --state-dir "$nodedir" >"$work/03.log" 2>&1 ||
    die "chapter 03 failed: $(tail -n 1 "$work/03.log")"
fi
GOTRACEBACK=all "$binary" "${args[@]}" >"$work/node.log" 2>&1 &
node_pid=$!
realnode::started "$node_pid" node
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
until kubectl get node "$node" >/dev/null 2>&1; do
  kill -0 "$node_pid" 2>/dev/null || die "the node program exited: $(tail -n 3 "$work/node.log")"
  (($(printf '%.0f' "$(elapsed "$start")") < 300)) || die "no Node $node after 300 s: $(tail -n 3 "$work/node.log")"
  sleep 0.1
done
kubectl wait --for=condition=Ready "node/$node" --timeout=300s >/dev/null || die "node $node not Ready within 300 s"
ready_s="$(elapsed "$start")"
deploy_start=$(date +%s.%N)
kubectl create deployment bench --image=busybox:1.36 --replicas=10 -- sh -c 'sleep 3600' >/dev/null
kubectl rollout status deployment/bench --timeout=300s >/dev/null || die "deployment bench not rolled out within 300 s"
rolled_s="$(elapsed "$start")"
deploy_s="$(elapsed "$deploy_start")"
echo "(a) Ready node after ${ready_s} s; Deployment of 10 replicas rolled out after ${rolled_s} s (${deploy_s} s after it was created)"
kubectl delete deployment bench --wait=true >/dev/null
kubectl wait --for=delete pod -l app=bench --timeout=120s >/dev/null 2>&1 || true

say "(b) a burst of $burst pods bound to the node"
printf '(b) '
writes >"$work/wb0"
"$work/capstone-bench" startup --node "$node" --pods "$burst" --label burst
writes >"$work/wb1"
# Every write while the burst started, per started pod: the bench's own
# creates and the scheduler's bindings are in it (1 each per pod), and
# whatever the control plane wrote by itself meanwhile.
echo "    API writes during the burst, per pod (the pods' creates and bindings included), by verb and resource:"
join -a 2 -e 0 -o 0,1.2,2.2 "$work/wb0" "$work/wb1" |
  awk -v n="$burst" '{ d = ($3 - $2) / n; t += d; if (d >= 0.05) printf "      %-40s %6.2f\n", $1, d } END { printf "      %-40s %6.2f\n", "total", t }'

say "(c) idle: $max_pods pods running, ${idle}s measured after 20 s of settling"
printf '    filling the node: '
"$work/capstone-bench" startup --node "$node" --pods "$max_pods" --label idle --keep
sleep 20
ticks() { awk '{ print $14 + $15 }' "/proc/$node_pid/stat"; }
t0_ticks="$(ticks)"; t0=$(date +%s.%N)
writes >"$work/w2"
sleep "$idle"
writes >"$work/w3"
t1_ticks="$(ticks)"
secs="$(elapsed "$t0")"
cpu="$(awk -v d="$((t1_ticks - t0_ticks))" -v hz="$(getconf CLK_TCK)" -v s="$secs" 'BEGIN { printf "%.1f", d / hz / s * 100 }')"
rss="$(awk '/^VmRSS:/ { printf "%.0f MiB", $2 / 1024 }' "/proc/$node_pid/status")"
threads="$(awk '/^Threads:/ { print $2 }' "/proc/$node_pid/status")"
goroutines="$(kubectl get --raw "/api/v1/nodes/$node/proxy/debug/pprof/goroutine?debug=1" 2>/dev/null | awk 'NR == 1 && /goroutine profile: total/ { print $4 " (from /debug/pprof)" }' || true)"
per_minute "$work/w2" "$work/w3" "$secs" >"$work/idle"
running="$(kubectl get pods -A --field-selector "spec.nodeName=$node,status.phase=Running" --no-headers 2>/dev/null | wc -l)"
if [[ -z "$goroutines" ]]; then
  # No /debug/pprof: end the program with SIGQUIT, whose stack dump (with
  # GOTRACEBACK=all, set at its start) lists every goroutine; the
  # measurements are done.
  kill -QUIT "$node_pid"
  for _ in $(seq 50); do kill -0 "$node_pid" 2>/dev/null || break; sleep 0.2; done
  goroutines="$(grep -Ec '^goroutine [1-9][0-9]* ' "$work/node.log" || true) (counted in its SIGQUIT stack dump, the runtime's own included: no /debug/pprof)"
fi
echo "(c) idle with $running pods running (--max-pods $max_pods), over ${secs} s: CPU ${cpu} % of one core, RSS ${rss}, goroutines ${goroutines}, OS threads ${threads}"
echo "    API writes per minute, this node's (idle window less the baseline), by verb and resource:"
join -a 1 -a 2 -e 0 -o 0,1.2,2.2 "$work/idle" "$work/base" |
  awk '{ d = $2 - $3; t += d; if (d >= 0.5) printf "      %-40s %6.1f  (idle %.1f, baseline %.1f)\n", $1, d, $2, $3 } END { printf "      %-40s %6.1f\n", "total", t }'
echo "load: $(uptime)"
