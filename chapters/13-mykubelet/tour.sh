# shellcheck shell=bash
# Chapter 13 tour: mykubelet from an empty state directory and a bootstrap
# kubeconfig to a Ready node and a Deployment; --config with flags over it;
# a pod beyond maxPods rejected; stopped past the grace period and started
# again, it adopts the running containers.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 13-mykubelet)"
runtime_bin="$(chapter_bin 05-pleg)"
port="${MYKUBELET_KUBELET_PORT:-10250}"
dir="$TOUR_DIR/mykubelet" # an empty state directory of its own
mkdir -p "$dir" && chmod 0700 "$dir"
[[ -f "$STATE_DIR/bootstrap-kubelet.kubeconfig" ]] || { echo "tour: no bootstrap kubeconfig in $STATE_DIR; run: scripts/tour.sh 02" >&2; return 1; }
kubectl delete deployment nginx-deployment --ignore-not-found >/dev/null 2>&1
kubectl delete pod too-many --ignore-not-found >/dev/null 2>&1

step "The runtime in a process of its own, so that it outlives the kubelet"
bg_start runtime "$runtime_bin" --pleg=false --state-dir "$dir" --control-address ""
wait_for_log runtime '^fake runtime: serving until Ctrl-C' 60 || return 1

step "mykubelet: a config file, flags over it, and nothing but a bootstrap kubeconfig"
sed "s/^port: .*/port: $port/" "$REPO_ROOT/yaml/kubelet-config.yaml" >"$dir/kubelet-config.yaml"
start_kubelet() {
  bg_start "$1" "$bin" --config "$dir/kubelet-config.yaml" --max-pods 3 --state-dir "$dir" \
    --bootstrap-kubeconfig "$STATE_DIR/bootstrap-kubelet.kubeconfig" --hostname-override "$NODE_NAME" \
    --fake-runtime=false --container-runtime-endpoint "unix://$dir/mykubelet.sock"
}
start_kubelet ch13
wait_for_log ch13 '^csr: node-csr-.* approved' 60 || return 1
wait_for_log ch13 '^serving certificate: ' 60 || return 1
observe "the serving certificate waits for an admin: approve our node's pending kubelet-serving CSRs"
kubectl get csr -o jsonpath='{range .items[?(@.spec.signerName=="kubernetes.io/kubelet-serving")]}{.metadata.name} {.spec.username} {.status.conditions}{"\n"}{end}' |
  awk -v u="system:node:$NODE_NAME" '$2 == u && NF == 2 {print $1}' | xargs -r kubectl certificate approve
wait_for_log ch13 '^node .*: status written .*Ready=True' 60 || return 1
show kubectl get node "$NODE_NAME" -o jsonpath='{.status.capacity.pods} pods (--max-pods over the file), kubelet port {.status.daemonEndpoints.kubeletEndpoint.Port}{"\n"}'

step "A Deployment of 3 fills the node; a 4th pod, bound by hand, is rejected"
show kubectl apply -f "$REPO_ROOT/yaml/nginx-deployment.yaml"
show kubectl rollout status deployment/nginx-deployment --timeout=120s
show kubectl run too-many --image=nginx:1.14.2 --overrides="{\"spec\":{\"nodeName\":\"$NODE_NAME\"}}"
wait_until 60 sh -c "kubectl get pod too-many -o jsonpath='{.status.phase}' | grep -qx Failed"
show kubectl get pod too-many -o jsonpath='{.status.phase} {.status.reason}: {.status.message}{"\n"}'
show kubectl exec deploy/nginx-deployment -- echo hello from the kubelet API

step "Stop the kubelet past the node monitor grace period: NotReady, pods not ready"
ids() { kubectl get pods -l app=nginx -o jsonpath='{range .items[*]}{.status.containerStatuses[0].containerID}{"\n"}{end}' | sort; }
ids >"$TOUR_DIR/before.txt"
bg_stop ch13
show kubectl wait --for=condition=Ready=Unknown "node/$NODE_NAME" --timeout=180s
show kubectl wait --for=condition=Ready=false pod -l app=nginx --timeout=60s

step "Start it again: it adopts the running containers"
start_kubelet ch13-again
wait_for_log ch13-again '^node .*: status written .*Ready=True' 60 || return 1
show kubectl wait --for=condition=Ready pod -l app=nginx --timeout=60s
ids >"$TOUR_DIR/after.txt"
show diff "$TOUR_DIR/before.txt" "$TOUR_DIR/after.txt"
observe "the same $(wc -l <"$TOUR_DIR/after.txt") container IDs: none killed, none created"

step "Clean up while the kubelet runs"
show kubectl delete deployment nginx-deployment --ignore-not-found
show kubectl delete pod too-many --ignore-not-found
wait_until 60 sh -c "! kubectl get pods -l app=nginx -o name | grep -q ."
bg_stop ch13-again
bg_stop runtime
