# shellcheck shell=bash
# Chapter 12 tour: the kubelet's own HTTPS server; its serving certificate
# approved by hand; kubectl logs and kubectl exec reach the node; 401 and
# 403 for those who may not.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 12-kubelet-server)"
port="${MYKUBELET_KUBELET_PORT:-10250}"
kubectl delete -f "$REPO_ROOT/yaml/kubelet-server-pods.yaml" --ignore-not-found >/dev/null 2>&1

step "Start the kubelet with its server; it asks for a serving certificate and waits"
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }
bg_start ch12 "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" --port "$port"
wait_for_log ch12 '^(csr: waiting|kubelet server: listening)' 60 || return 1
if grep -q '^csr: waiting' "$TOUR_DIR/ch12.log"; then
  show kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving
  observe "Pending: the controller manager approves node client certificates, never serving ones"
  kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving -o name | xargs kubectl certificate approve
fi
wait_for_log ch12 '^kubelet server: listening' 60 || return 1
wait_for_log ch12 '^node .*: status written .*Ready=True' 60 || return 1

step "Pods that write logs, end, and crash"
show kubectl apply -f "$REPO_ROOT/yaml/kubelet-server-pods.yaml"
show kubectl wait --for=condition=Ready pod/chatty --timeout=60s

step "kubectl logs: the API server asks our kubelet, which reads the CRI log file"
show kubectl logs chatty
show kubectl logs chatty --tail=1
show kubectl logs chatty --timestamps
observe "-f follows until the container ends:"
show kubectl logs -f countdown
wait_until 90 kubectl logs crasher --previous
show kubectl logs crasher --previous

step "kubectl exec: the runtime's streaming server, the exit code, stdin"
show kubectl exec chatty -- sh -c 'echo hi; exit 3' || observe "exit code $? (the command's)"
# shellcheck disable=SC2016 # expanded by the pod's shell
printf 'x=41\necho $((x+1))\n' | show kubectl exec -i chatty -- sh

step "Without credentials: 401; with a token RBAC does not allow: 403"
kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$TOUR_DIR/ca.crt"
show curl -s --cacert "$TOUR_DIR/ca.crt" "https://127.0.0.1:$port/pods"
token="$(kubectl create token default)"
# shellcheck disable=SC2016 # printed as the reader would type it
printf '$ curl -s --cacert %s -H "Authorization: Bearer $(kubectl create token default)" %s\n' "$TOUR_DIR/ca.crt" "https://127.0.0.1:$port/pods"
curl -s --cacert "$TOUR_DIR/ca.crt" -H "Authorization: Bearer $token" "https://127.0.0.1:$port/pods"

step "Clean up while the kubelet runs"
show kubectl delete -f "$REPO_ROOT/yaml/kubelet-server-pods.yaml" --ignore-not-found
bg_stop ch12
