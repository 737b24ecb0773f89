# shellcheck shell=bash
# Chapter 07 tour: two pod sources merged by PodConfig, kept by the pod manager.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 07-pod-config)"
manifests="$STATE_DIR/manifests"
addr="127.0.0.1:${MYKUBELET_DEBUG_PORT:-10255}"
mkdir -p "$manifests"
cp "$REPO_ROOT/yaml/static/static-web.yaml" "$manifests/"
kubectl delete pod nginx-kubelet --grace-period=0 --force --ignore-not-found >/dev/null 2>&1

step "Start: the file source and the API server source, merged"
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }
bg_start ch07 "$bin" --node-name "$NODE_NAME" --debug-address "$addr"
wait_for_log ch07 '^debug server on '
wait_for_log ch07 "^SyncLoop ADD source=file pods=\[default/static-web-$NODE_NAME\]" 30
observe "the static pod's mirror pod comes back from the API source with the same name:"
wait_for_log ch07 "^SyncLoop ADD source=api pods=\[default/static-web-$NODE_NAME\]" 30

step "Bind nginx to the node: ADD from the API server, and it shows in /pods"
show bash -c "sed 's/NODE_NAME/$NODE_NAME/' '$REPO_ROOT/yaml/nginx.yaml' | kubectl apply -f -"
wait_for_log ch07 '^SyncLoop ADD source=api pods=\[default/nginx-kubelet\]' 30
observe "open http://$addr/pods in a browser; the table's pod links:"
show curl -s "http://$addr/pods?format=html" -o "$TOUR_DIR/pods.html"
grep -o '<a href="/pods/[^"]*">' "$TOUR_DIR/pods.html"
grep -q '<a href="/pods/default/nginx-kubelet">' "$TOUR_DIR/pods.html"
observe "nothing runs it, so it stays Pending:"
show kubectl get pod nginx-kubelet -o wide

step "Delete it: DELETE (graceful), then REMOVE (forced): it leaves /pods"
show kubectl delete pod nginx-kubelet --wait=false
wait_for_log ch07 '^SyncLoop DELETE source=api pods=\[default/nginx-kubelet\]' 30
show kubectl delete pod nginx-kubelet --grace-period=0 --force
wait_for_log ch07 '^SyncLoop REMOVE source=api pods=\[default/nginx-kubelet\]' 30
show curl -s -o /dev/null -w '%{http_code}\n' "http://$addr/pods/default/nginx-kubelet"
[[ "$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/pods/default/nginx-kubelet")" == 404 ]]

bg_stop ch07
rm -f "$manifests/static-web.yaml"
