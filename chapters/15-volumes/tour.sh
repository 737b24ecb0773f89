# shellcheck shell=bash
# Chapter 15 tour: the volume manager; the documentation's ConfigMap,
# Secret, projected, downward API, emptyDir and termination-message
# examples on our node; the service-account token in a TokenReview; a
# claim this node cannot mount; the pod's directory gone with the pod.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 15-volumes)"
port="${MYKUBELET_KUBELET_PORT:-10250}"
kubectl delete -f "$REPO_ROOT/yaml/volumes/" --ignore-not-found --cascade=foreground >/dev/null 2>&1

step "Start the kubelet with its volume manager"
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }
bg_start ch15 "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" --port "$port"
wait_for_log ch15 '^(csr: waiting|kubelet server: listening)' 60 || return 1
if grep -q '^csr: waiting' "$TOUR_DIR/ch15.log"; then
  observe "no serving certificate of chapter 12 to reuse: approving this node's serving CSR"
  kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving | awk -v u="system:node:$NODE_NAME" '$4 == u && $NF == "Pending" {print $1}' | xargs -r kubectl certificate approve
fi
wait_for_log ch15 '^kubelet server: listening' 60 || return 1
wait_for_log ch15 '^node .*: status written .*Ready=True' 60 || return 1

step "The documentation's volume examples"
show kubectl apply -f "$REPO_ROOT/yaml/volumes/"
show kubectl wait --for=condition=Ready pod/secret-test-pod pod/test-projected-volume pod/kubernetes-downwardapi-volume-example pod/token-reader --timeout=120s
show kubectl rollout status deployment/configmap-volume --timeout=120s

step "A ConfigMap, a Secret, a projected volume, the downward API, a shared emptyDir"
wait_until 60 kubectl logs dapi-test-pod
show kubectl logs dapi-test-pod
show kubectl exec secret-test-pod -- cat /etc/secret-volume/username
echo
show kubectl exec test-projected-volume -- ls /projected-volume/
show kubectl exec kubernetes-downwardapi-volume-example -- cat /etc/podinfo/labels
echo
wait_until 60 kubectl exec two-containers -c nginx-container -- cat /usr/share/nginx/html/index.html
show kubectl exec two-containers -c nginx-container -- cat /usr/share/nginx/html/index.html

step "The downward API follows a label"
show kubectl label pod kubernetes-downwardapi-volume-example rack=rack-23 --overwrite
labels_changed() { kubectl exec kubernetes-downwardapi-volume-example -- cat /etc/podinfo/labels | grep -q 'rack="rack-23"'; }
wait_until 60 labels_changed
show kubectl exec kubernetes-downwardapi-volume-example -- cat /etc/podinfo/labels
echo

step "The ConfigMap changes: the files follow at the pod's next sync (up to 90 s)"
pod="$(kubectl get pod -l app.kubernetes.io/name=configmap-volume -o jsonpath='{.items[0].metadata.name}')"
show kubectl exec "$pod" -- cat /etc/config/sport
echo
show kubectl patch configmap sport --type merge -p '{"data":{"sport":"cricket"}}'
sport_changed() { [[ "$(kubectl exec "$pod" -- cat /etc/config/sport)" == cricket ]]; }
wait_until 150 sport_changed
show kubectl exec "$pod" -- cat /etc/config/sport
echo

step "The service-account token every pod gets, sent to a TokenReview"
token="$(kubectl exec token-reader -- cat /var/run/secrets/kubernetes.io/serviceaccount/token)"
printf '$ kubectl create -f - -o json   (a TokenReview of the token in token-reader)\n'
printf '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"%s"}}' "$token" |
  kubectl create -f - -o jsonpath='{.status.user.username}{"\n"}{.status.user.extra}{"\n"}'
observe "authentication.kubernetes.io/pod-name is token-reader: the token is bound to the pod"

step "A claim this node cannot mount, and the termination message"
wait_until 60 sh -c "kubectl describe pod task-pv-pod | grep -q FailedMount"
kubectl describe pod task-pv-pod | grep -m1 FailedMount
wait_until 90 sh -c "kubectl get pod termination-demo -o jsonpath='{.status.containerStatuses[0].lastState.terminated.message}' | grep -q 'Sleep expired'"
show kubectl get pod termination-demo -o jsonpath='{.status.containerStatuses[0].lastState.terminated.message}'

step "The node may read what its pods reference, and nothing else"
kubectl create secret generic not-for-nodes --from-literal=password=hunter2 --dry-run=client -o yaml | kubectl apply -f - >/dev/null
show kubectl auth can-i get secret/test-secret --as "system:node:$NODE_NAME" --as-group system:nodes
show kubectl auth can-i get secret/not-for-nodes --as "system:node:$NODE_NAME" --as-group system:nodes || observe "no: no pod on $NODE_NAME uses it"

step "The pod's directory, before and after delete"
uid="$(kubectl get pod secret-test-pod -o jsonpath='{.metadata.uid}')"
show ls "$STATE_DIR/pods/$uid/volumes"
show kubectl delete pod secret-test-pod
gone() { [[ ! -e "$STATE_DIR/pods/$uid" ]]; }
wait_until 30 gone
observe "$STATE_DIR/pods/$uid is gone"

step "Clean up while the kubelet runs"
show kubectl delete -f "$REPO_ROOT/yaml/volumes/" --ignore-not-found --cascade=foreground
kubectl delete secret not-for-nodes --ignore-not-found >/dev/null
bg_stop ch15
