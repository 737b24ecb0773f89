# shellcheck shell=bash
# Chapter 17 tour: a node of 1Gi; a Guaranteed pod runs on while a
# BestEffort pod grows until the eviction manager evicts it; MemoryPressure
# and the controller manager's taint; a BestEffort pod bound to the node
# refused; the transition period; then a small image filesystem filled by
# a pod's images and emptied by image GC once they are unused.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 17-node-pressure)"
port="${MYKUBELET_KUBELET_PORT:-10250}"
kubectl delete -f "$REPO_ROOT/yaml/pressure/" --ignore-not-found >/dev/null 2>&1
kubectl delete pod refused --ignore-not-found >/dev/null 2>&1
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }

memory_pressure() { kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="MemoryPressure")].status}'; }
is_pressure() { [[ "$(memory_pressure)" == "$1" ]]; }
tainted() { kubectl get node "$NODE_NAME" -o jsonpath='{.spec.taints[*].key}' | grep -q memory-pressure; }
untainted() { ! tainted; }

step "Start the kubelet on a mock machine of 1Gi, with a transition period of 1m"
bg_start ch17 "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" --port "$port" --fake-memory-capacity 1Gi --eviction-pressure-transition-period 1m
wait_for_log ch17 '^(csr: waiting|kubelet server: listening)' 60 || return 1
if grep -q '^csr: waiting' "$TOUR_DIR/ch17.log"; then
  observe "no serving certificate of chapter 12 to reuse: approving this node's serving CSR"
  kubectl get csr --field-selector spec.signerName=kubernetes.io/kubelet-serving | awk -v u="system:node:$NODE_NAME" '$4 == u && $NF == "Pending" {print $1}' | xargs -r kubectl certificate approve
fi
wait_for_log ch17 '^node pressure: ' 60 || return 1
wait_for_log ch17 '^eviction: ' 10 || return 1
wait_for_log ch17 '^node .*: status written .*Ready=True' 60 || return 1
show kubectl get node "$NODE_NAME" -o jsonpath='{.status.capacity.memory}{"\n"}'
[[ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.capacity.memory}')" == 1Gi ]] || { echo "tour: the node's memory is not the mock machine's 1Gi" >&2; return 1; }

step "A Guaranteed pod holding 600Mi, then a BestEffort pod growing by 16Mi every 2 s"
show kubectl apply -f "$REPO_ROOT/yaml/pressure/steady.yaml"
show kubectl wait --for=condition=Ready pod/steady --timeout=120s
show kubectl apply -f "$REPO_ROOT/yaml/pressure/grower.yaml"
wait_until 180 is_pressure True
observe "memory.available fell below 100Mi: MemoryPressure True, and the controller manager taints the node"
wait_until 30 tainted
kubectl describe node "$NODE_NAME" | grep -E '^Taints:|MemoryPressure'

step "Under memory pressure, a BestEffort pod bound to the node is refused"
show kubectl run refused --image=busybox --restart=Never --overrides="{\"spec\":{\"nodeName\":\"$NODE_NAME\"}}" -- sleep 3600
wait_until 30 kubectl wait --for=jsonpath='{.status.phase}'=Failed pod/refused --timeout=1s
show kubectl get pod refused -o jsonpath='{.status.phase} {.status.reason}: {.status.message}{"\n"}'

step "The BestEffort pod is evicted; the Guaranteed pod runs on"
show kubectl wait --for=jsonpath='{.status.reason}'=Evicted pod/grower --timeout=60s
show kubectl get pod steady grower -o custom-columns=NAME:.metadata.name,PHASE:.status.phase,REASON:.status.reason,QOS:.status.qosClass
show kubectl get pod grower -o jsonpath='{.status.message}{"\n"}'
show kubectl get events --field-selector involvedObject.name=grower,reason=Evicted
[[ "$(kubectl get pod steady -o jsonpath='{.status.phase}')" == Running ]] || { echo "tour: the Guaranteed pod does not run" >&2; return 1; }

step "After the transition period (1m): no pressure, no taint"
wait_until 150 is_pressure False
wait_until 30 untainted
kubectl describe node "$NODE_NAME" | grep -E '^Taints:|MemoryPressure'
show kubectl delete pod steady grower refused
bg_stop ch17

step "A small image filesystem (300Mi), collected every 10 s from 50% down to 40%"
bg_start ch17-images "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" --port "$port" --fake-imagefs-capacity 300Mi --image-gc-period 10s --image-gc-high-threshold 50 --image-gc-low-threshold 40 --minimum-image-gc-age 10s
wait_for_log ch17-images '^node .*: status written .*Ready=True' 60 || return 1
ca="$TOUR_DIR/ca.crt"
kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$ca"
[[ -s "$ca" ]] || cp "$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority}')" "$ca"
kubectl apply -f "$REPO_ROOT/yaml/metrics/stats-reader.yaml" >/dev/null
token="$(kubectl create token stats-reader)"
imagefs() { curl -sf --cacert "$ca" -H "Authorization: Bearer $token" "https://127.0.0.1:$port/stats/summary" | jq -r '.node.runtime.imageFs | "images: \(.usedBytes / 1048576 | floor)Mi of \(.capacityBytes / 1048576 | floor)Mi (\(.usedBytes * 100 / .capacityBytes | floor)%)"'; }
low() { curl -sf --cacert "$ca" -H "Authorization: Bearer $token" "https://127.0.0.1:$port/stats/summary" | jq -e '.node.runtime.imageFs | .usedBytes * 100 <= .capacityBytes * 40' >/dev/null; }
show kubectl apply -f "$REPO_ROOT/yaml/pressure/images.yaml"
show kubectl wait --for=condition=Ready pod/several-images --timeout=120s
imagefs
observe "over the high threshold, but every image is in use: FreeDiskSpaceFailed on the node"
wait_until 60 bash -c "kubectl get events --field-selector involvedObject.kind=Node,involvedObject.name=$NODE_NAME,reason=FreeDiskSpaceFailed -o name | grep -q ."
kubectl get events --field-selector involvedObject.kind=Node,involvedObject.name="$NODE_NAME",reason=FreeDiskSpaceFailed -o custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message | head -2
show kubectl delete pod several-images
wait_until 120 low
observe "the unused images were deleted, least recently used first, down to the low threshold"
imagefs
grep -m3 'Removing image to free bytes' "$TOUR_DIR/ch17-images.log" || true
bg_stop ch17-images
kubectl delete -f "$REPO_ROOT/yaml/metrics/stats-reader.yaml" --ignore-not-found >/dev/null
