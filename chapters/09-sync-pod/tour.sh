# shellcheck shell=bash
# Chapter 09 tour: the whole kubelet runs a pod, a Deployment and a Job that
# kubectl sees Running (and Complete) on our node.
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 09-sync-pod)"
kubectl delete pod hello --ignore-not-found >/dev/null 2>&1
kubectl delete deployment nginx-deployment --ignore-not-found >/dev/null 2>&1
kubectl delete job hello-job --ignore-not-found >/dev/null 2>&1

step "Start the whole kubelet: node half (04) and pod half (08), SyncPod for real"
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }
bg_start ch09 "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR"
wait_for_log ch09 '^node .*: status written .*Ready=True' 60 || return 1

step "A pod from the Kubernetes docs: the scheduler places it, our kubelet runs it"
show kubectl apply -f "$REPO_ROOT/yaml/hello.yaml"
wait_for_log ch09 '^pod default/hello: phase Pending -> Running' 60 || return 1
show kubectl get pod hello -o wide
observe "Running with an IP from the mock runtime; the events come from the kubelet on $NODE_NAME:"
show bash -c "kubectl describe pod hello | sed -n '/^Events:/,\$p'"

step "A Deployment of three replicas, rolled out"
show kubectl apply -f "$REPO_ROOT/yaml/nginx-deployment.yaml"
show kubectl rollout status deployment/nginx-deployment --timeout=120s
show kubectl get pods -l app=nginx -o wide

step "A Job that runs to completion"
show kubectl apply -f "$REPO_ROOT/yaml/job.yaml"
show kubectl wait --for=condition=complete job/hello-job --timeout=120s
show kubectl get pods -l job-name=hello-job

step "A graceful delete: the kubelet stops the container, writes the terminal phase, the pod goes"
show kubectl delete pod hello
wait_for_log ch09 '^syncTerminatedPod default/hello: ' 30 || return 1

step "Clean up while the kubelet runs: it finishes each deletion"
show kubectl delete deployment nginx-deployment
show kubectl delete job hello-job
show kubectl delete pod -l app=nginx --ignore-not-found
show kubectl delete pod -l job-name=hello-job --ignore-not-found
bg_stop ch09
