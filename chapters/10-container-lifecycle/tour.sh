# shellcheck shell=bash
# Chapter 10 tour: a crash loop with its back-off, a graceful delete that
# takes its grace period, a Job that gives up, and a kubelet restart that
# kills nothing, against a runtime of its own (chapter 05 without its PLEG).
# Sourced by scripts/tour.sh with scripts/tour-lib.sh loaded (see there).

bin="$(chapter_bin 10-container-lifecycle)"
rtbin="$(chapter_bin 05-pleg)"
for p in crashloop graceful hello; do kubectl delete pod "$p" --ignore-not-found >/dev/null 2>&1; done
kubectl delete job job-fails --ignore-not-found >/dev/null 2>&1
kubectl get node "$NODE_NAME" >/dev/null || { echo "tour: node $NODE_NAME is not registered; run: scripts/tour.sh 04" >&2; return 1; }

step "The runtime on its own (chapter 05, no PLEG), and the kubelet against it"
bg_start ch10rt "$rtbin" --pleg=false --control-address "" --state-dir "$STATE_DIR"
wait_for_log ch10rt '^fake runtime: serving until Ctrl-C' 60 || return 1
bg_start ch10 "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" --fake-runtime=false
wait_for_log ch10 '^node .*: status written .*Ready=True' 60 || return 1

step "A container that exits 1 under restartPolicy Always: restarted, each time after a longer back-off"
show kubectl apply -f "$REPO_ROOT/yaml/crashloop.yaml"
wait_for_log ch10 '^syncPod sync default/crashloop: start crashloop failed: CrashLoopBackOff' 120 || return 1
wait_until 120 bash -c "kubectl get pod crashloop -o jsonpath='{.status.containerStatuses[0].state.waiting.message}' | grep -q 'back-off 20s'"
show kubectl get pod crashloop
show kubectl get pod crashloop -o jsonpath='{.status.containerStatuses[0].state.waiting.message}{"\n"}'
observe "back-off 10 s, then 20 s, doubling to 300 s; the BackOff events are one event with a count:"
show kubectl get events --field-selector involvedObject.name=crashloop,reason=BackOff -o custom-columns=TYPE:.type,REASON:.reason,COUNT:.count,MESSAGE:.message

step "A Job whose pods always fail, with backoffLimit 1: two pods, then the Job fails"
show kubectl apply -f "$REPO_ROOT/yaml/job-fails.yaml"
show kubectl wait --for=condition=failed job/job-fails --timeout=180s
show kubectl get pods -l job-name=job-fails

step "A graceful delete: preStop (3 s), then SIGTERM ignored, SIGKILL at the end of the 10 s grace period"
show kubectl apply -f "$REPO_ROOT/yaml/graceful.yaml"
show kubectl wait --for=condition=Ready pod/graceful --timeout=120s
start=$SECONDS
show kubectl delete pod graceful
observe "the delete took $((SECONDS - start)) s"
wait_for_log ch10 '^syncTerminatingPod default/graceful: stopped 1 container\(s\) and the sandbox \(grace period 10s\)' 30 || return 1

step "Ctrl-C the kubelet: the runtime keeps running the pods; started again, the kubelet adopts them"
show kubectl apply -f "$REPO_ROOT/yaml/hello.yaml"
show kubectl wait --for=condition=Ready pod/hello --timeout=120s
before="$(kubectl get pod hello -o jsonpath='{.status.containerStatuses[0].containerID}')"
bg_stop ch10
bg_start ch10b "$bin" --node-name "$NODE_NAME" --state-dir "$STATE_DIR" --fake-runtime=false
wait_for_log ch10b '^node .*: status written .*Ready=True' 60 || return 1
show kubectl get pod hello
after="$(kubectl get pod hello -o jsonpath='{.status.containerStatuses[0].containerID}')"
[[ "$before" == "$after" ]] || { echo "tour: hello's container changed across the restart ($before -> $after)" >&2; return 1; }
observe "same container ($after), restartCount 0"

step "Clean up while the kubelet runs"
show kubectl delete job job-fails
show kubectl delete pod crashloop hello --ignore-not-found
show kubectl delete pod -l job-name=job-fails --ignore-not-found
bg_stop ch10b
bg_stop ch10rt
