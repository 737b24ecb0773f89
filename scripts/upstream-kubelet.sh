# shellcheck shell=bash
# Upstream's kubelet $KUBE_VERSION for the scripts that run it beside the
# capstone on containerd (scripts/realnode-bench.sh, scripts/conformance.sh).
# Source it after scripts/lib.sh; do not run it.
#
# It is built once, like the control plane (scripts/build-control-plane.sh):
# from a copy of the tools module scripts/tools with
# k8s.io/kubernetes/cmd/kubelet added (go mod tidy adds the three modules
# only the kubelet needs), into $MYKUBELET_CACHE_DIR/kubelet-v1.37.1.
#
# It runs with protectKernelDefaults in a mount namespace of its own where
# the /proc/sys files it checks (setupKernelTunables: vm.overcommit_memory
# 1, kernel.panic 10, …) are bind-mounted from files holding its values: it
# reads what it wants and changes nothing on the machine (without
# protectKernelDefaults it would set them for the whole machine; with it and
# the machine's values it refuses to start).

UPSTREAM_DIR="$CACHE_DIR/kubelet-$KUBE_VERSION"
UPSTREAM_KUBELET="$UPSTREAM_DIR/kubelet"

# build_upstream_kubelet: k8s.io/kubernetes/cmd/kubelet at $KUBE_VERSION,
# with the control plane's flags, once (a few minutes with the control
# plane's build cache warm).
build_upstream_kubelet() {
  local ldflags stamp_want tmp tools="$REPO_ROOT/scripts/tools"
  ldflags="$(kube_ldflags)"
  stamp_want="$(printf '%s\n' "CGO_ENABLED=0 go build -trimpath" "$ldflags" k8s.io/kubernetes/cmd/kubelet |
    cat - "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-16)"
  if [[ -x "$UPSTREAM_KUBELET" && "$(cat "$UPSTREAM_DIR/.build-stamp" 2>/dev/null)" == "$stamp_want" ]]; then
    return 0
  fi
  say "building upstream's kubelet $KUBE_VERSION into $UPSTREAM_DIR (once; minutes on 2 cores)"
  mkdir -p "$UPSTREAM_DIR"
  tmp="$(mktemp -d)"
  cp -r "$tools/." "$tmp/"
  sed -i 's#^\t_ "k8s.io/kubernetes/cmd/kubectl"$#&\n\t_ "k8s.io/kubernetes/cmd/kubelet"#' "$tmp/tools.go"
  grep -q 'cmd/kubelet"' "$tmp/tools.go" || { rm -rf "$tmp"; die "could not add cmd/kubelet to a copy of $tools/tools.go"; }
  if ! (cd "$tmp" && go mod tidy && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$UPSTREAM_KUBELET" k8s.io/kubernetes/cmd/kubelet); then
    rm -rf "$tmp"
    die "building upstream's kubelet failed (see the go output above)"
  fi
  rm -rf "$tmp"
  echo "$stamp_want" >"$UPSTREAM_DIR/.build-stamp"
}

# start_upstream_kubelet SYSCTL_DIR SHARED_ROOT LOG ARGS…: upstream's
# kubelet with ARGS in the background ($! is its pid once it has exec'd),
# output to LOG, in a mount namespace of its own with its kernel values
# bind-mounted from files it writes in SYSCTL_DIR (umount SYSCTL_DIR/* when
# done).
#
# SHARED_ROOT empty: every mount is private to the namespace, so the
# volumes it mounts (the service-account token's tmpfs, secrets, …) are not
# seen by containerd, which runs outside, and pods mount nothing of them.
# SHARED_ROOT a directory (its --root-dir): that directory is bind-mounted
# on itself and made shared before the namespace is made, and the namespace
# keeps the mounts' propagation (only /proc is made private in it, for the
# kernel values), so what the kubelet mounts under its root dir shows in
# the machine's namespace, where containerd bind-mounts it into the
# containers. The caller unmounts SHARED_ROOT (and what is left under it)
# when the kubelet is gone: unmount_tree SHARED_ROOT.
start_upstream_kubelet() {
  local s="$1" shared="$2" log="$3" f binds="" propagation=private
  shift 3
  # The values its container manager asks of the kernel (setupKernelTunables).
  declare -A want=([vm/overcommit_memory]=1 [vm/panic_on_oom]=0 [kernel/panic]=10 [kernel/panic_on_oops]=1
    [kernel/keys/root_maxkeys]=1000000 [kernel/keys/root_maxbytes]=25000000)
  mkdir -p "$s"
  for f in "${!want[@]}"; do
    echo "${want[$f]}" >"$s/${f//\//_}"
    binds+="mount --bind '$s/${f//\//_}' '/proc/sys/$f' && "
  done
  if [[ -n "$shared" ]]; then
    if ! { mount --bind "$shared" "$shared" && mount --make-shared "$shared"; }; then
      die "could not make $shared a shared mount"
    fi
    propagation=unchanged
    binds="mount --make-rprivate /proc && $binds"
  fi
  unshare --mount --propagation "$propagation" sh -c "$binds exec \"\$0\" \"\$@\"" "$UPSTREAM_KUBELET" "$@" >"$log" 2>&1 &
}

# unmount_tree DIR: every mount at or under DIR, deepest first.
unmount_tree() {
  local m
  awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
}
