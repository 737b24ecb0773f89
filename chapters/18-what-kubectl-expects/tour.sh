# shellcheck shell=bash
# Chapter 18 tour: the node's pod CIDR; a Job with a sidecar that
# completes; port-forward to nginx and curl through it; kubectl cp both
# ways; kubectl attach and kubectl debug with piped stdin; a second node
# (the capstone) with a range of its own; the node's System UUID, images
# and the kubelet's events.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 18-what-kubectl-expects)"
capstone="$(chapter_bin 13-mykubelet)"
port="${MYKUBELET_KUBELET_PORT:-10250}"
node2="$NODE_NAME-2"
kubectl delete job myjob --ignore-not-found >/dev/null 2>&1
kubectl delete pod nginx attach-demo ephemeral-demo on-node-2 --ignore-not-found >/dev/null 2>&1
kubectl delete node "$node2" --ignore-not-found >/dev/null 2>&1
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }
[[ -f "$STATE_DIR/bootstrap-kubelet.kubeconfig" ]] || { echo "tour: no bootstrap kubeconfig in $STATE_DIR; run: scripts/tour.sh 02" >&2; return 1; }

step "Start the kubelet; the controller manager has given the node a pod CIDR"
bg_start ch18 "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" --port "$port"
wait_for_log ch18 '^(csr: waiting|kubelet server: listening)' 60 || return 1
if grep -q '^csr: waiting' "$TOUR_DIR/ch18.log"; then
  observe "no serving certificate to reuse: approving this node's serving CSR"
  kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving | awk -v u="system:node:$NODE_NAME" '$4 == u && $NF == "Pending" {print $1}' | xargs -r kubectl certificate approve
fi
wait_for_log ch18 '^node .*: status written .*Ready=True' 60 || return 1
wait_until 30 sh -c "kubectl get node '$NODE_NAME' -o jsonpath='{.spec.podCIDR}' | grep -q ."
show kubectl get node "$NODE_NAME" -o jsonpath='{.spec.podCIDR}{"\n"}'

step "A Job with a sidecar (the documentation's): the sidecar starts first, is stopped last, and the Job completes"
show kubectl apply -f "$REPO_ROOT/yaml/kubectl/job-sidecar.yaml"
show kubectl wait --for=condition=complete job/myjob --timeout=120s
show kubectl get pods -l job-name=myjob -o jsonpath='{range .items[*]}{.status.phase}: {range .status.initContainerStatuses[*]}{.name} {.state.terminated.reason}, {end}{range .status.containerStatuses[*]}{.name} {.state.terminated.reason}{end}{"\n"}{end}'
show kubectl logs job/myjob -c logshipper
show kubectl delete job myjob --wait

step "Port forwarding: a random local port to nginx's 80, and curl through it"
show kubectl run nginx --image=nginx --port=80
show kubectl wait --for=condition=Ready pod/nginx --timeout=120s
bg_start port-forward kubectl port-forward pod/nginx :80
local_port="$(wait_for_log port-forward '^Forwarding from 127\.0\.0\.1:[0-9]+ -> 80' 30 | sed -E 's/.*127\.0\.0\.1:([0-9]+) .*/\1/')" || return 1
observe "kubectl chose local port $local_port"
curl -sf "http://127.0.0.1:$local_port/" | grep '<title>'
bg_stop port-forward

step "kubectl cp: a file into the container, and back out (tar over exec)"
show kubectl cp "$REPO_ROOT/yaml/kubectl/job-sidecar.yaml" nginx:/tmp/job-sidecar.yaml
show kubectl exec nginx -- ls /tmp
show kubectl cp nginx:/tmp/job-sidecar.yaml "$TOUR_DIR/job-sidecar.yaml"
show diff "$REPO_ROOT/yaml/kubectl/job-sidecar.yaml" "$TOUR_DIR/job-sidecar.yaml"
observe "the same bytes, both ways"

step "kubectl attach: commands piped to busybox's sh (stdin: true, stdinOnce: true)"
show kubectl run attach-demo --image=busybox --restart=Never --stdin --attach=false
show kubectl wait --for=condition=Ready pod/attach-demo --timeout=60s
# shellcheck disable=SC2016 # $(hostname) is the container's shell's
echo 'echo hello from $(hostname)' | kubectl attach attach-demo -i | grep 'hello from attach-demo'
show kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/attach-demo --timeout=30s
observe "the first attach ended, stdin closed, the shell exited: the pod is done"

step "kubectl debug: an ephemeral container in the pause container's process namespace"
show kubectl run ephemeral-demo --image=registry.k8s.io/pause:3.1 --restart=Never
show kubectl wait --for=condition=Ready pod/ephemeral-demo --timeout=60s
# shellcheck disable=SC2016 # $(hostname) is the container's shell's
echo 'echo in $(hostname); ps; exit' | kubectl debug -i ephemeral-demo --image=busybox:1.28 --target=ephemeral-demo 2>&1 | grep 'in ephemeral-demo'
show kubectl wait --for=jsonpath='{.status.ephemeralContainerStatuses[0].state.terminated.reason}'=Completed pod/ephemeral-demo --timeout=30s
show kubectl get pod ephemeral-demo -o jsonpath='{range .status.ephemeralContainerStatuses[*]}{.name}: {.state.terminated.reason}, restarts {.restartCount}{"\n"}{end}'

step "A second node (the capstone), with a pod CIDR of its own"
dir2="$TOUR_DIR/node-2"
mkdir -p "$dir2" && chmod 0700 "$dir2"
bg_start node-2 "$capstone" --state-dir "$dir2" --bootstrap-kubeconfig "$STATE_DIR/bootstrap-kubelet.kubeconfig" --hostname-override "$node2" --port $((port + 1))
wait_for_log node-2 '^node .*: status written .*Ready=True' 120 || return 1
show kubectl run on-node-2 --image=busybox --restart=Never --overrides="{\"spec\":{\"nodeName\":\"$node2\"}}" -- sleep 3600
show kubectl wait --for=condition=Ready pod/on-node-2 --timeout=60s
show kubectl get nodes "$NODE_NAME" "$node2" -o custom-columns=NAME:.metadata.name,POD-CIDR:.spec.podCIDR
show kubectl get pods nginx on-node-2 -o custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,IP:.status.podIP
cidr1="$(kubectl get node "$NODE_NAME" -o jsonpath='{.spec.podCIDR}')"
cidr2="$(kubectl get node "$node2" -o jsonpath='{.spec.podCIDR}')"
[[ -n "$cidr1" && -n "$cidr2" && "$cidr1" != "$cidr2" ]] || { echo "tour: the two nodes' pod CIDRs are not two ranges: '$cidr1' '$cidr2'" >&2; return 1; }
observe "two ranges, two sets of pod IPs"

step "The node's status: System UUID, images, the kubelet's events"
kubectl describe node "$NODE_NAME" | grep -E '^ +(Machine ID|System UUID|Boot ID):'
kubectl get node "$NODE_NAME" -o json | jq -r '.status.images[] | "\(.sizeBytes)\t\(.names[-1])"' | head -5
kubectl get events --field-selector involvedObject.kind=Node,involvedObject.name="$node2",source=kubelet --no-headers -o custom-columns=REASON:.reason,MESSAGE:.message | sort -u
kubectl get events --field-selector involvedObject.kind=Node,involvedObject.name="$node2",reason=Starting -o name | grep -q . || { echo "tour: no Starting event on $node2" >&2; return 1; }

step "Clean up: the second node's pod, the node, the examples"
show kubectl delete pod on-node-2
bg_stop node-2
show kubectl delete node "$node2"
show kubectl delete pod nginx attach-demo ephemeral-demo
bg_stop ch18
