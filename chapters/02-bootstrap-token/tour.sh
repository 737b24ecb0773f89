# shellcheck shell=bash
# Chapter 02 tour: a bootstrap token, its Secret, kubeadm's RBAC and the
# bootstrap kubeconfig; then who the token is and how little it may do.
# Sourced by scripts/tour.sh with the helpers of scripts/tour-lib.sh.

bin="$(chapter_bin 02-bootstrap-token)" || return 1
out="$TOUR_DIR/02-bootstrap-token.out"
bootstrap_kc="$STATE_DIR/bootstrap-kubelet.kubeconfig"

step "As the administrator: create (or reuse) a bootstrap token, its Secret and RBAC; write the bootstrap kubeconfig"
show "$bin" --state-dir "$STATE_DIR" | tee "$out"
[[ ${PIPESTATUS[0]} -eq 0 ]] || return 1
id="$(sed -n 's/^token: .*, id \([a-z0-9]\{6\}\)$/\1/p' "$out")"
[[ -n "$id" ]] || { echo "tour: chapter 02 printed no token id" >&2; return 1; }
observe "the token's id ($id) is public: it names the Secret and the user; its secret part is printed nowhere"

step "The Secret the API server's bootstrap token authenticator reads"
show kubectl -n kube-system get secret "bootstrap-token-$id" || return 1
groups="$(kubectl -n kube-system get secret "bootstrap-token-$id" -o jsonpath='{.data.auth-extra-groups}' | base64 -d)"
printf '    auth-extra-groups: %s\n' "$groups"
[[ "$groups" == "system:bootstrappers:kubeadm:default-node-token" ]] || { echo "tour: unexpected auth-extra-groups '$groups'" >&2; return 1; }
observe "type bootstrap.kubernetes.io/token, in kube-system, named bootstrap-token-<id>; the token is in kubeadm's group"

step "kubeadm's three ClusterRoleBindings"
show kubectl get clusterrolebinding kubeadm:kubelet-bootstrap kubeadm:node-autoapprove-bootstrap kubeadm:node-autoapprove-certificate-rotation -o wide || return 1
observe "the group may create CSRs (node-bootstrapper) and have them approved (nodeclient); nodes may renew theirs (selfnodeclient)"

step "Who the bootstrap kubeconfig is, and how little it may do"
show kubectl --kubeconfig "$bootstrap_kc" auth whoami || return 1
user="$(kubectl --kubeconfig "$bootstrap_kc" auth whoami -o jsonpath='{.status.userInfo.username}')"
[[ "$user" == "system:bootstrap:$id" ]] || { echo "tour: the bootstrap kubeconfig is '$user', not system:bootstrap:$id" >&2; return 1; }
show kubectl --kubeconfig "$bootstrap_kc" auth can-i create certificatesigningrequests || return 1
if show kubectl --kubeconfig "$bootstrap_kc" auth can-i list secrets -n kube-system; then
  echo "tour: the bootstrap token may list secrets: it should not" >&2
  return 1
fi
observe "system:bootstrap:$id may create CSRs and nothing much else: that is all a new node needs"
