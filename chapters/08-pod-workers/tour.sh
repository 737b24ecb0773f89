# shellcheck shell=bash
# Chapter 08 tour: pod workers sync a pod bound to the node, then terminate it.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 08-pod-workers)"
addr="127.0.0.1:${MYKUBELET_DEBUG_PORT:-10255}"
kubectl delete pod nginx-kubelet --grace-period=0 --force --ignore-not-found >/dev/null 2>&1

step "Start: pod config (07), the PLEG over the mock runtime (05), and the pod workers"
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }
bg_start ch08 "$bin" --node-name "$NODE_NAME" --debug-address "$addr"
wait_for_log ch08 '^debug server on '

step "Bind nginx to the node: its worker runs syncPod"
show bash -c "sed 's/NODE_NAME/$NODE_NAME/' '$REPO_ROOT/yaml/nginx.yaml' | kubectl apply -f -"
wait_for_log ch08 '^syncPod create default/nginx-kubelet' 30
observe "syncPod got the pod after the PLEG's relist stamped the pod cache (GetNewerThan)"

step "Delete it: the termination path runs, and the kubelet finishes the deletion"
show kubectl delete pod nginx-kubelet
wait_for_log ch08 '^syncTerminatingPod default/nginx-kubelet' 30
wait_for_log ch08 '^syncTerminatedPod default/nginx-kubelet' 30
wait_for_log ch08 '^pod default/nginx-kubelet: finishing its deletion in the API server' 30
observe "housekeeping drops the finished worker:"
wait_for_log ch08 '^pod worker default/nginx-kubelet .* cleaned up' 30

bg_stop ch08
