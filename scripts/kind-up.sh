#!/usr/bin/env bash
# Creates the kind cluster for the tutorial (inside the lima VM, see vm.yaml),
# writes its kubeconfig to the state directory, and installs metrics-server
# v0.8.0 (yaml/metrics-server: the upstream release manifest with
# --kubelet-insecure-tls, for kind's self-signed kubelet certificates), then
# waits until its APIService v1beta1.metrics.k8s.io is Available.
#
#   scripts/kind-up.sh            create (or reuse) the cluster named mykubelet
#   scripts/kind-up.sh --delete   delete it
#
# Settings: KIND_CLUSTER_NAME (mykubelet), KIND_NODE_IMAGE (Kubernetes v1.37.0,
# pinned by digest: the image the release notes of kind v0.33.0, the version
# vm.yaml installs, name for it; a tag alone may name a build for another
# kind release).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

name="${KIND_CLUSTER_NAME:-mykubelet}"
image="${KIND_NODE_IMAGE:-kindest/node:v1.37.0@sha256:a1ed56cfb0e7b93589bdf97c8cd566405a265939e3620fc4f5de89adff580ae5}"
kubeconfig="$STATE_DIR/kind.kubeconfig"

command -v kind >/dev/null || die "kind is not installed: use the lima VM (limactl start --name=mykubelet ./vm.yaml) or the local control plane (scripts/cluster.sh up)"
command -v docker >/dev/null || die "docker is not installed (kind needs it): use the lima VM, or the local control plane (scripts/cluster.sh up)"
command -v kubectl >/dev/null || die "kubectl is not installed: use the lima VM (vm.yaml installs it)"

case "${1:-}" in
  --delete)
    kind delete cluster --name "$name"
    rm -f "$kubeconfig"
    exit 0
    ;;
  "") ;;
  *) die "usage: scripts/kind-up.sh [--delete]" ;;
esac

if kind get clusters 2>/dev/null | grep -x "$name" >/dev/null; then
  say "kind cluster '$name' exists already"
else
  kind create cluster --name "$name" --image "$image" --config "$REPO_ROOT/yaml/kind.yaml" --wait 120s
fi
mkdir -p "$STATE_DIR" && chmod 0700 "$STATE_DIR"
kind get kubeconfig --name "$name" >"$kubeconfig"
chmod 0600 "$kubeconfig"
say "installing metrics-server v0.8.0 (yaml/metrics-server)"
kubectl --kubeconfig "$kubeconfig" apply -k "$REPO_ROOT/yaml/metrics-server"
kubectl --kubeconfig "$kubeconfig" wait --for=condition=Available --timeout=180s apiservice/v1beta1.metrics.k8s.io ||
  die "metrics-server's APIService is not Available: kubectl --kubeconfig $kubeconfig -n kube-system logs deploy/metrics-server"
cat >&2 <<MSG
kind cluster '$name' is ready. Use it in this shell with:
  export KUBECONFIG=$kubeconfig
  kubectl get nodes
  kubectl top node      # once metrics-server has scraped the nodes twice
MSG
