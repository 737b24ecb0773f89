# shellcheck shell=bash
# Chapter 06 tour: a static pod from a manifest file, and its mirror pod.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 06-static-pods)"
manifests="$STATE_DIR/manifests"
pod="static-web-$NODE_NAME"
mkdir -p "$manifests"
rm -f "$manifests/static-web.yaml" "$manifests/broken.yaml"

step "Start the static-pod kubelet (node credentials from chapter 03, Node from chapter 04)"
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }
bg_start ch06 "$bin" --node-name "$NODE_NAME" --housekeeping-interval 1s
wait_for_log ch06 '^watching '

step "Drop a manifest into $manifests"
show cp "$REPO_ROOT/yaml/static/static-web.yaml" "$manifests/"
wait_for_log ch06 "^mirror pod default/$pod created$" 30
show kubectl get pod "$pod" -o wide
observe "the name is <manifest name>-<node name>; the annotations and the owner reference are what NodeRestriction demands:"
show kubectl get pod "$pod" -o jsonpath='{.metadata.annotations}{"\n"}{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{"\n"}'

step "A malformed manifest is logged with its file name and skipped"
printf 'kind: Pod\n' >"$manifests/broken.yaml"
wait_for_log ch06 'Could not process manifest file.*broken.yaml' 15
rm -f "$manifests/broken.yaml"
show kubectl get pod "$pod"

step "Delete the mirror pod: the kubelet puts it back"
old_uid="$(kubectl get pod "$pod" -o jsonpath='{.metadata.uid}')"
show kubectl delete pod "$pod"
wait_for_log ch06 "^mirror pod default/$pod recreated$" 30
wait_until 15 kubectl get pod "$pod"
observe "a new UID (was $old_uid):"
show kubectl get pod "$pod" -o jsonpath='{.metadata.uid}{"\n"}'

step "Edit the manifest: the mirror pod is replaced"
show sed -i 's/app: static-web/app: static-web-v2/' "$manifests/static-web.yaml"
wait_for_log ch06 "^mirror pod default/$pod replaced$" 30
wait_until 15 bash -c "kubectl get pod '$pod' -o jsonpath='{.metadata.labels.app}' | grep -qx static-web-v2"
show kubectl get pod "$pod" --show-labels

step "Remove the manifest: the mirror pod goes away"
show rm "$manifests/static-web.yaml"
wait_for_log ch06 "^mirror pod default/$pod deleted" 30
wait_until 15 bash -c "! kubectl get pod '$pod' >/dev/null 2>&1"
show kubectl get pods --field-selector "spec.nodeName=$NODE_NAME"

bg_stop ch06
