# shellcheck shell=bash
# Chapter 16 tour: the kubelet measures; `kubectl top` through metrics-server;
# a pod that burns a core; /stats/summary for an identity allowed
# nodes/stats and refused without it; /metrics/resource; an HPA scaling a
# Deployment up while its pod burns and down when it stops; the kubelet's
# own series on /metrics.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 16-stats-metrics)"
port="${MYKUBELET_KUBELET_PORT:-10250}"
kubectl delete -f "$REPO_ROOT/yaml/metrics/" --ignore-not-found --cascade=foreground >/dev/null 2>&1

step "The metrics API: metrics-server, behind the API server's aggregation layer"
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }
wait_until 120 kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes ||
  { echo "tour: no metrics API: metrics-server does not run (scripts/cluster.sh up starts it; kubectl get apiservice v1beta1.metrics.k8s.io says why)" >&2; return 1; }
show kubectl get apiservice v1beta1.metrics.k8s.io

step "Start the kubelet with its stats provider and its series"
bg_start ch16 "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" --port "$port"
wait_for_log ch16 '^(csr: waiting|kubelet server: listening)' 60 || return 1
if grep -q '^csr: waiting' "$TOUR_DIR/ch16.log"; then
  observe "no serving certificate of chapter 12 to reuse: approving this node's serving CSR"
  kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving | awk -v u="system:node:$NODE_NAME" '$4 == u && $NF == "Pending" {print $1}' | xargs -r kubectl certificate approve
fi
wait_for_log ch16 '^kubelet server: listening' 60 || return 1
wait_for_log ch16 '^stats: ' 10 || return 1
wait_for_log ch16 '^node .*: status written .*Ready=True' 60 || return 1

step "kubectl top node: figures once metrics-server has scraped /metrics/resource twice"
wait_until 120 kubectl top node "$NODE_NAME"
show kubectl top node "$NODE_NAME"

step "A pod that burns a core"
show kubectl apply -f "$REPO_ROOT/yaml/metrics/burner.yaml"
show kubectl wait --for=condition=Ready pod/burner --timeout=120s
wait_until 120 kubectl top pod burner
show kubectl top pod burner
observe "close to 1000m when a core is free: the mock runtime counts the CPU time its script's thread took"
show kubectl top node "$NODE_NAME"

step "/stats/summary on the kubelet's port: allowed with nodes/stats, refused without"
ca="$TOUR_DIR/ca.crt"
kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$ca"
[[ -s "$ca" ]] || cp "$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')" "$ca"
show kubectl apply -f "$REPO_ROOT/yaml/metrics/stats-reader.yaml"
token="$(kubectl create token stats-reader)"
kubelet_get() { curl -sf --cacert "$ca" -H "Authorization: Bearer $token" "https://127.0.0.1:$port$1"; }
burner_stats() { kubelet_get /stats/summary | jq -e -c '.pods[] | select(.podRef.name == "burner") | .containers[] | {name, usageNanoCores: .cpu.usageNanoCores, workingSetBytes: .memory.workingSetBytes}'; }
wait_until 30 burner_stats
printf '$ curl … https://127.0.0.1:%s/stats/summary | jq …   (as stats-reader: nodes/stats)\n' "$port"
burner_stats
printf '$ curl … https://127.0.0.1:%s/stats/summary   (as default: no nodes/stats)\n' "$port"
refused="$(curl -s --cacert "$ca" -H "Authorization: Bearer $(kubectl create token default)" "https://127.0.0.1:$port/stats/summary")"
echo "$refused"
[[ "$refused" == Forbidden* ]] || { echo "tour: /stats/summary answered a user without nodes/stats" >&2; return 1; }

step "/metrics/resource: the series metrics-server reads"
printf '$ curl … https://127.0.0.1:%s/metrics/resource | grep cpu_usage_seconds_total\n' "$port"
kubelet_get /metrics/resource | grep -E '^node_cpu_usage|cpu_usage_seconds_total\{.*pod="burner"'

step "A HorizontalPodAutoscaler: up while the pod burns"
show kubectl delete pod burner
show kubectl apply -f "$REPO_ROOT/yaml/metrics/hpa.yaml"
show kubectl rollout status deployment/hpa-demo --timeout=120s
show kubectl annotate pods -l app=hpa-demo burn=yes --overwrite
show kubectl wait --for=jsonpath='{.status.desiredReplicas}'=4 hpa/hpa-demo --timeout=4m
show kubectl rollout status deployment/hpa-demo --timeout=2m
show kubectl get hpa hpa-demo

step "... and down when it stops (scaleDown.stabilizationWindowSeconds: 0)"
show kubectl annotate pods -l app=hpa-demo burn=no --overwrite
show kubectl wait --for=jsonpath='{.status.desiredReplicas}'=1 hpa/hpa-demo --timeout=4m
kubectl describe hpa hpa-demo | grep SuccessfulRescale

step "/metrics: the kubelet's own series"
printf '$ curl … https://127.0.0.1:%s/metrics | grep …\n' "$port"
kubelet_get /metrics | grep -E '^kubelet_(pod_start_sli_duration_seconds_(count|sum)|running_pods) '
observe "the pod start SLI counted the burner and the hpa-demo pods this kubelet started"

step "Clean up while the kubelet runs"
show kubectl delete -f "$REPO_ROOT/yaml/metrics/" --ignore-not-found --cascade=foreground
bg_stop ch16
