# shellcheck shell=bash
# Chapter 03 tour: TLS bootstrap. With only chapter 02's bootstrap kubeconfig,
# get the node a client certificate through a CSR the controller manager
# approves; run again to see it reused; then approve one by hand.
# Sourced by scripts/tour.sh with the helpers of scripts/tour-lib.sh.
# It leaves $STATE_DIR/kubelet.kubeconfig for $NODE_NAME: chapter 04 uses it.

bin="$(chapter_bin 03-tls-bootstrap)" || return 1
bin02="$(chapter_bin 02-bootstrap-token)" || return 1
out="$TOUR_DIR/03-tls-bootstrap.out"
node_kc="$STATE_DIR/kubelet.kubeconfig"

step "As the node $NODE_NAME, with the bootstrap kubeconfig only: key, CSR, approval, certificate, node kubeconfig"
show "$bin" --state-dir "$STATE_DIR" --node-name "$NODE_NAME" --timeout 2m | tee "$out"
[[ ${PIPESTATUS[0]} -eq 0 ]] || return 1
csr="$(sed -n 's/^csr: \(created\|found\) \(node-csr-[^ ]*\) for .*/\2/p' "$out")"
if [[ -n "$csr" ]]; then
  show kubectl get csr "$csr" || return 1
  approval="$(kubectl get csr "$csr" -o jsonpath='{.status.conditions[0].reason}: {.status.conditions[0].message}')"
  printf '    %s\n' "$approval"
  [[ "$approval" == "AutoApproved: Auto approving kubelet client certificate after SubjectAccessReview." ]] ||
    { echo "tour: $csr was not auto-approved ('$approval')" >&2; return 1; }
  observe "REQUESTOR is the bootstrap token; CONDITION Approved,Issued: the csrapprover approved it, the csrsigning controller signed it"
else
  observe "a valid node kubeconfig was already there (an earlier tour): reused, no CSR"
fi

step "The certificate and who the node is now"
if command -v openssl >/dev/null; then
  show openssl x509 -in "$STATE_DIR/pki/kubelet-client-current.pem" -noout -subject -issuer || return 1
fi
show kubectl --kubeconfig "$node_kc" auth whoami || return 1
user="$(kubectl --kubeconfig "$node_kc" auth whoami -o jsonpath='{.status.userInfo.username}')"
[[ "$user" == "system:node:$NODE_NAME" ]] || { echo "tour: the node kubeconfig is '$user', not system:node:$NODE_NAME" >&2; return 1; }
show kubectl --kubeconfig "$node_kc" auth can-i create nodes || return 1
if show kubectl --kubeconfig "$node_kc" auth can-i list secrets -n kube-system; then
  echo "tour: the node may list all secrets: it should not" >&2
  return 1
fi
observe "user system:node:$NODE_NAME in group system:nodes: the identity the Node authorizer and NodeRestriction know"

step "Run it again: the certificate is still valid, so no new CSR"
before="$(kubectl get csr -o name | wc -l)"
show "$bin" --state-dir "$STATE_DIR" --node-name "$NODE_NAME" | tee "$out"
[[ ${PIPESTATUS[0]} -eq 0 ]] || return 1
grep -q 'reusing it, no new CSR' "$out" || { echo "tour: the second run did not reuse the certificate" >&2; return 1; }
after="$(kubectl get csr -o name | wc -l)"
[[ "$before" == "$after" ]] || { echo "tour: the second run created a CSR ($before -> $after)" >&2; return 1; }
observe "like a kubelet restarting with a good kubelet-client-current.pem: $after CSRs before and after"

step "Manual approval: a token whose group is not bound to nodeclient (a separate state dir and node name)"
manual="$TOUR_DIR/manual-state"
show "$bin02" --state-dir "$manual" --auto-approve=false | grep -E '^rbac: node client CSRs' || return 1
bg_start manual "$bin" --state-dir "$manual" --node-name "$NODE_NAME-manual" --timeout 1m || return 1
wait_for_log manual '^csr: waiting up to' 30 || return 1
pending="$(sed -n 's/^csr: created \(node-csr-[^ ]*\) for .*/\1/p' "$TOUR_DIR/manual.log")"
[[ -n "$pending" ]] || { echo "tour: no CSR name in the output" >&2; return 1; }
sleep 2 # give the csrapprover time to decide (it will not approve)
show kubectl get csr "$pending" || return 1
[[ -z "$(kubectl get csr "$pending" -o jsonpath='{.status.conditions}')" ]] || { echo "tour: $pending was not left pending" >&2; return 1; }
observe "CONDITION Pending: the csrapprover asked, and group system:bootstrappers:mykubelet:manual-approval may not create nodeclient CSRs"
show kubectl certificate approve "$pending" || return 1
wait_for_log manual 'approved \(KubectlApprove\) and signed' 30 || return 1
wait_for_log manual '^whoami: username system:node:' 30 || return 1
pid="$(cat "$TOUR_DIR/manual.pid")"
wait "$pid" || { echo "tour: the manual run failed" >&2; return 1; }
rm -f "$TOUR_DIR/manual.pid"
observe "the waiting program picked up the approval and finished: reason KubectlApprove"
