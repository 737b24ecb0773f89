# shellcheck shell=bash
# Chapter 11 tour: probes decide a pod's Ready, its Service endpoints and
# its restarts. Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded.

bin="$(chapter_bin 11-probes)"
kubectl delete pod readiness-exec liveness-http --ignore-not-found >/dev/null 2>&1
kubectl delete service readiness-exec --ignore-not-found >/dev/null 2>&1

step "Start the kubelet with its prober (as root: the mock runtime makes its pod network)"
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }
# A pod range of its own, so a README walk running beside the tour (as in
# CI) keeps 10.88.0.0/16: two mock runtimes cannot route one range.
bg_start ch11 "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" --pod-cidr 10.89.0.0/16
wait_for_log ch11 '^node .*: status written' 60 || return 1
wait_for_log ch11 '^pod network: ' 5 || return 1
sock="$STATE_DIR/runtime-control.sock" # the control API: a unix socket only this user may use

step "Readiness: 0/1 until the first probe passes, then 1/1 and a ready endpoint"
show kubectl apply -f "$REPO_ROOT/yaml/probes/exec-readiness.yaml" -f "$REPO_ROOT/yaml/probes/readiness-service.yaml"
show kubectl get pod readiness-exec
wait_for_log ch11 '^SyncLoop \(probe\) probe="readiness" status="ready" pod="default/readiness-exec"' 60 || return 1
show kubectl get pod readiness-exec
show kubectl get endpointslices -l kubernetes.io/service-name=readiness-exec -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]} ready={.conditions.ready}{"\n"}{end}'
observe "the file goes 30 s after the start; three failed probes later the pod is 0/1 and its endpoint not ready"
wait_until 90 bash -c "kubectl get pod readiness-exec -o jsonpath='{.status.containerStatuses[0].ready}' | grep -qx false"
show kubectl get pod readiness-exec
wait_until 30 bash -c "kubectl get endpointslices -l kubernetes.io/service-name=readiness-exec -o jsonpath='{.items[0].endpoints[0].conditions.ready}' | grep -qx false"
show kubectl get endpointslices -l kubernetes.io/service-name=readiness-exec -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]} ready={.conditions.ready}{"\n"}{end}'
show kubectl get events --field-selector involvedObject.name=readiness-exec,reason=Unhealthy

step "Mend it from outside, through the mock runtime's control API"
show curl -s --unix-socket "$sock" -X POST "http://localhost/pods/default/readiness-exec/containers/readiness/exec?cmd=touch%20/tmp/healthy"
wait_until 30 bash -c "kubectl get pod readiness-exec -o jsonpath='{.status.containerStatuses[0].ready}' | grep -qx true"
show kubectl get pod readiness-exec

step "Liveness: agnhost answers 500 after 10 s; the kubelet kills and restarts it"
show kubectl apply -f "$REPO_ROOT/yaml/probes/http-liveness.yaml"
wait_for_log ch11 '^syncPod sync default/liveness-http: stopped liveness, started liveness' 90 || return 1
show bash -c "kubectl describe pod liveness-http | sed -n '/^Events:/,\$p'"

step "Clean up while the kubelet runs"
show kubectl delete service readiness-exec
show kubectl delete pod readiness-exec liveness-http
bg_stop ch11
