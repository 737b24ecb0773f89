#!/usr/bin/env bash
# A real container runtime for the capstone (chapter 19): containerd, runc
# and the CNI plugins, started like the local control plane, with everything
# of its own under the state directory. Root only.
#
#   scripts/containerd.sh up       install what is missing (apt), write the
#                                  configuration and the CNI network, start
#                                  containerd, wait for its socket
#   scripts/containerd.sh install  only what up and images install the first
#                                  time (apt, crictl, busybox-static): no
#                                  configuration, nothing started
#   scripts/containerd.sh images   build the offline images (pause, busybox)
#                                  and import them (no registry needed);
#                                  with --e2e DIR also the e2e specs' images
#                                  from DIR/agnhost, DIR/nnp and DIR/curl (scripts/conformance.sh)
#   scripts/containerd.sh down     remove every pod it runs, stop it, unmount
#                                  what it mounted, delete its bridge
#   scripts/containerd.sh status   whether it runs, its version, socket, network
#   scripts/containerd.sh env      print the exports that point crictl and ctr
#                                  at it: eval "$(scripts/containerd.sh env)"
#
# Files: $MYKUBELET_STATE_DIR/containerd/ (default .state/containerd):
# config.toml, containerd.sock, containerd.log, root/ and state/ (images,
# snapshots, containers), cni/ (the network's configuration and its IP
# allocations), images/ (the offline image archives).
#
# Settings: MYKUBELET_CONTAINERD: debian (default: Debian's containerd 1.6,
# apt) or v2 (containerd $CONTAINERD_V2_VERSION, built once from its Go module
# into $MYKUBELET_CACHE_DIR; runc and the CNI plugins still from apt);
# MYKUBELET_CNI_SUBNET (default 10.22.0.0/16: not the mock runtime's
# 10.88.0.0/16 nor the control plane's cluster CIDR 10.128.0.0/12) and
# MYKUBELET_CNI_BRIDGE (default mykubelet0), for a second runtime beside the
# first (tests).
#
# The network stays on this machine: the bridge and its address are made
# here, the CNI bridge plugin neither masquerades nor is the pods' gateway,
# so the host does not forward and the pods have a route to their own subnet
# only (no default route).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CONTAINERD_V2_VERSION="v2.4.2"
CRICTL_VERSION="v1.37.0"
# The sandbox (pause) image containerd starts every pod with. Offline it is
# our build (scripts/containerd.sh images), with registry access upstream's.
PAUSE_IMAGE="registry.k8s.io/pause:3.10"

CTR_DIR="$STATE_DIR/containerd"
SOCK="$CTR_DIR/containerd.sock"
CONFIG="$CTR_DIR/config.toml"
LOG="$CTR_DIR/containerd.log"
PID_FILE="$CTR_DIR/containerd.pid"
CNI_CONF_DIR="$CTR_DIR/cni/net.d"
SUBNET="${MYKUBELET_CNI_SUBNET:-10.22.0.0/16}"
BRIDGE="${MYKUBELET_CNI_BRIDGE:-mykubelet0}"
FLAVOR="${MYKUBELET_CONTAINERD:-debian}"
CNI_BIN_DIR="/usr/lib/cni"
V2_BIN_DIR="$CACHE_DIR/containerd-$CONTAINERD_V2_VERSION/bin"
CRICTL_BIN_DIR="$CACHE_DIR/crictl-$CRICTL_VERSION/bin"

case "$FLAVOR" in
  debian) BIN_PATH="" ;;
  v2) BIN_PATH="$V2_BIN_DIR" ;;
  *) die "MYKUBELET_CONTAINERD must be debian or v2, not '$FLAVOR'" ;;
esac

need_root() {
  [[ $EUID -eq 0 ]] || die "scripts/containerd.sh $1 must run as root (containerd, runc and the CNI plugins make mounts, namespaces and cgroups): sudo -E scripts/containerd.sh $1"
}

# ctr_bin / containerd_bin: the flavour's binaries.
containerd_bin() { if [[ -n "$BIN_PATH" ]]; then echo "$BIN_PATH/containerd"; else command -v containerd; fi; }
ctr_bin() { if [[ -n "$BIN_PATH" ]]; then echo "$BIN_PATH/ctr"; else command -v ctr; fi; }
ctr_do() { "$(ctr_bin)" --address "$SOCK" "$@"; }

running_pid() {
  local pid p
  pid="$(cat "$PID_FILE" 2>/dev/null)" || pid=""
  # The pid is ours only while it is still containerd with our config.
  if [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -F -- "--config $CONFIG " >/dev/null; then
    echo "$pid"
    return 0
  fi
  # The pid file lost (a state directory half removed): ours by its command
  # line. One grep finds the few processes that name the config (a tr and
  # a grep for each of a busy machine's hundreds took seconds, more than a
  # caller's wait allowed); then the whole command line of each.
  while IFS= read -r p; do
    if tr '\0' ' ' 2>/dev/null <"$p" | grep -F -- "containerd --config $CONFIG " >/dev/null; then
      p="${p%/cmdline}"
      echo "${p#/proc/}"
      return 0
    fi
  done < <(grep -alF -- "$CONFIG" /proc/[0-9]*/cmdline 2>/dev/null)
  return 1
}

# install_missing: Debian's packages for whatever is not there (containerd
# and ctr, runc, the CNI plugins); `apt-get update` once if the install fails.
install_missing() {
  local pkgs=()
  if [[ "$FLAVOR" == debian ]]; then
    { command -v containerd && command -v ctr && command -v containerd-shim-runc-v2; } >/dev/null || pkgs+=(containerd)
  fi
  command -v runc >/dev/null || pkgs+=(runc)
  local p
  for p in bridge host-local loopback portmap; do
    [[ -x "$CNI_BIN_DIR/$p" ]] || { pkgs+=(containernetworking-plugins); break; }
  done
  command -v iptables >/dev/null || pkgs+=(iptables) # portmap's
  [[ ${#pkgs[@]} -gt 0 ]] || return 0
  command -v apt-get >/dev/null || die "missing: ${pkgs[*]}, and there is no apt-get here to install them: install them with your package manager"
  say "installing ${pkgs[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${pkgs[@]}" >"$CTR_DIR/apt.log" 2>&1; then
    say "apt-get install failed; apt-get update, then again"
    { apt-get -o DPkg::Lock::Timeout=300 update -q && apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends "${pkgs[@]}"; } >>"$CTR_DIR/apt.log" 2>&1 ||
      die "could not install ${pkgs[*]} (see $CTR_DIR/apt.log)"
  fi
}

# install_busybox: Debian's busybox-static, for the offline busybox image
# (Debian's busybox package is linked dynamically).
install_busybox() {
  command -v apt-get >/dev/null || return 0
  dpkg-query -W -f '${Status}' busybox-static 2>/dev/null | grep '^install ok installed' >/dev/null && return 0
  say "installing busybox-static (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get -o DPkg::Lock::Timeout=300 install -y -q busybox-static ||
    { apt-get -o DPkg::Lock::Timeout=300 update -q && apt-get -o DPkg::Lock::Timeout=300 install -y -q busybox-static; }; } >"$CTR_DIR/apt.log" 2>&1 ||
    die "could not install busybox-static (see $CTR_DIR/apt.log)"
}

# cmd_install: what up and images install or build the first time, and
# nothing else (scripts/tour.sh runs it before its first step, so that a
# learner sees the minutes of a first install as they pass).
cmd_install() {
  need_root install
  mkdir -p "$STATE_DIR" "$CTR_DIR" && chmod 0700 "$STATE_DIR"
  install_missing
  if [[ "$FLAVOR" == v2 ]]; then build_v2; fi
  install_crictl
  install_busybox
  say "installed: $(version_line), $(runc --version | head -n 1), the CNI plugins in $CNI_BIN_DIR$([[ -x "$CRICTL_BIN_DIR/crictl" ]] && echo ", crictl $CRICTL_VERSION")"
}

# build_v2: containerd $CONTAINERD_V2_VERSION (containerd, ctr and the runc
# shim) from the module scripts/tools/containerd, once.
build_v2() {
  local stamp_want stamp_file="$V2_BIN_DIR/.build-stamp" tools="$REPO_ROOT/scripts/tools/containerd" lock
  stamp_want="$(cat "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-16)"
  mkdir -p "$V2_BIN_DIR"
  # One build at a time: another run (a test of another package, on a
  # first run) may be building it now; this one waits, then finds it built.
  exec {lock}>"$V2_BIN_DIR/.build-lock"
  flock "$lock"
  if [[ -x "$V2_BIN_DIR/containerd" && -x "$V2_BIN_DIR/ctr" && -x "$V2_BIN_DIR/containerd-shim-runc-v2" &&
    "$(cat "$stamp_file" 2>/dev/null)" == "$stamp_want" ]]; then
    exec {lock}>&-
    return 0
  fi
  command -v go >/dev/null || die "go is not installed (need Go 1.26 to build containerd $CONTAINERD_V2_VERSION)"
  say "building containerd $CONTAINERD_V2_VERSION into $V2_BIN_DIR (once; a few minutes on 2 cores)"
  local v="github.com/containerd/containerd/v2/version"
  (cd "$tools" && CGO_ENABLED=0 go_progress "containerd $CONTAINERD_V2_VERSION" build -v -trimpath -tags no_btrfs,no_devmapper,no_zfs \
    -ldflags "-s -w -X $v.Version=$CONTAINERD_V2_VERSION -X $v.Package=github.com/containerd/containerd/v2" \
    -o "$V2_BIN_DIR/" github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/ctr github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2) ||
    die "building containerd $CONTAINERD_V2_VERSION failed (see the go output above)"
  echo "$stamp_want" >"$stamp_file"
  exec {lock}>&-
}

# install_crictl: crictl $CRICTL_VERSION, Kubernetes' CRI command line, from
# its Go module (no package here has it), once.
install_crictl() {
  [[ -x "$CRICTL_BIN_DIR/crictl" ]] && return 0
  command -v go >/dev/null || { say "no go: crictl not installed (ctr works: eval \"\$(scripts/containerd.sh env)\"; ctr containers ls)"; return 0; }
  say "installing crictl $CRICTL_VERSION into $CRICTL_BIN_DIR (go install, once)"
  mkdir -p "$CRICTL_BIN_DIR"
  GOBIN="$CRICTL_BIN_DIR" CGO_ENABLED=0 go_progress crictl install -v -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" || die "go install crictl failed (see the go output above)"
}

# snapshotter: overlayfs where an overlay mount works in the state directory
# (not on every filesystem, e.g. not on another overlay), else native (copies).
snapshotter() {
  local d ok=false
  d="$(mktemp -d "$CTR_DIR/.overlay-check.XXXXXX")"
  mkdir "$d/lower" "$d/upper" "$d/work" "$d/merged"
  if mount -t overlay overlay -o "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work" "$d/merged" 2>/dev/null; then
    umount "$d/merged" && ok=true
  fi
  rm -rf "$d"
  if $ok; then echo overlayfs; else echo native; fi
}

write_config() {
  local snap="$1"
  mkdir -p "$CTR_DIR/root" "$CTR_DIR/state" "$CNI_CONF_DIR" "$CTR_DIR/cni/networks"
  # Version 2 is containerd 1.6's format; containerd 2.x reads it too
  # (and migrates it in memory to its version 3).
  cat >"$CONFIG" <<EOF
# Written by scripts/containerd.sh up (any change here is overwritten).
version = 2
root = "$CTR_DIR/root"
state = "$CTR_DIR/state"

[grpc]
  address = "$SOCK"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here may not lower a process's oom_score_adj; without this runc
  # fails every sandbox ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  # kubectl exec, logs -f, port-forward: the streaming server, on loopback.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$snap"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # The cgroupfs driver: the kubelet names cgroup paths, no systemd.
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
EOF
  # The pods' network: a bridge of our own, addresses from host-local (its
  # allocations under the state directory), loopback, portmap for hostPort.
  cat >"$CNI_CONF_DIR/10-mykubelet.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "mykubelet",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CTR_DIR/cni/networks",
        "ranges": [[{"subnet": "$SUBNET"}]]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
EOF
}

# bridge_up: the bridge with the subnet's first address, so that the host
# (the kubelet's probes) reaches the pods without forwarding anything.
bridge_up() {
  local net="${SUBNET%/*}" bits="${SUBNET#*/}" a b c d
  IFS=. read -r a b c d <<<"$net"
  local gw="$a.$b.$c.$((d + 1))/$bits"
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge || die "could not create the bridge $BRIDGE"
  fi
  # grep reads all of ip's output (no -q): under pipefail, a grep that
  # quits at its match can make ip die of SIGPIPE, and the pipe fail.
  ip addr show dev "$BRIDGE" | grep -F " $gw " >/dev/null || ip addr add "$gw" dev "$BRIDGE" ||
    die "could not give $BRIDGE the address $gw (is $SUBNET already in use here? set MYKUBELET_CNI_SUBNET)"
  ip link set "$BRIDGE" up
}

version_line() { "$(containerd_bin)" --version 2>/dev/null | head -n 1; }

cmd_up() {
  need_root up
  mkdir -p "$STATE_DIR" "$CTR_DIR" && chmod 0700 "$STATE_DIR"
  if pid="$(running_pid)"; then
    say "containerd already runs (pid $pid, $SOCK)"
    return 0
  fi
  install_missing
  if [[ "$FLAVOR" == v2 ]]; then build_v2; fi
  install_crictl
  local snap
  snap="$(snapshotter)"
  say "snapshotter: $snap"
  write_config "$snap"
  bridge_up
  say "CNI network: bridge $BRIDGE, pods in $SUBNET (no masquerade, no default route)"
  rm -f "$SOCK"
  say "starting $(version_line) (log: $LOG)"
  # Its own session: it outlives this script, and Ctrl-C here does not stop it.
  # The v2 build's runc shim is found through PATH, beside its containerd.
  PATH="${BIN_PATH:+$BIN_PATH:}$PATH" setsid "$(containerd_bin)" --config "$CONFIG" >>"$LOG" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  local i
  for i in $(seq 1 300); do
    if ctr_do version >/dev/null 2>&1; then
      say "containerd is ready on unix://$SOCK (after $((i / 10)).$((i % 10)) s)"
      cat >"$CTR_DIR/crictl.yaml" <<EOF
runtime-endpoint: unix://$SOCK
image-endpoint: unix://$SOCK
timeout: 10
EOF
      cat >&2 <<MSG
Use it in this shell with:
  eval "\$(scripts/containerd.sh env)"
  crictl version
Offline (no registry): scripts/containerd.sh images   imports pause and busybox
MSG
      return 0
    fi
    kill -0 "$(cat "$PID_FILE")" 2>/dev/null || die "containerd exited at once; the last lines of $LOG: $(tail -n 5 "$LOG")"
    sleep 0.1
  done
  die "containerd did not answer on $SOCK within 30 s (see $LOG)"
}

cmd_images() {
  local e2e=() e2e_dir="${1:-}"
  need_root images
  if [[ -n "$e2e_dir" ]]; then
    [[ -x "$e2e_dir/agnhost" && -x "$e2e_dir/nnp" && -x "$e2e_dir/curl" ]] || die "--e2e $e2e_dir: no agnhost, nnp and curl there (scripts/conformance.sh builds them)"
    e2e=(-agnhost "$e2e_dir/agnhost" -nonewprivs "$e2e_dir/nnp" -curl "$e2e_dir/curl")
  fi
  running_pid >/dev/null || die "containerd is not running: scripts/containerd.sh up"
  install_busybox
  command -v go >/dev/null || die "go is not installed (need Go 1.26 to build the images)"
  local snap
  snap="$(sed -n 's/^ *snapshotter = "\(.*\)"$/\1/p' "$CONFIG")"
  say "building the offline images (scripts/tools/images) into $CTR_DIR/images"
  (cd "$REPO_ROOT/scripts/tools/images" && go run . -out "$CTR_DIR/images" -ctr "$(ctr_bin)" -address "$SOCK" \
    -snapshotter "$snap" -pause-image "$PAUSE_IMAGE" -busybox /bin/busybox "${e2e[@]}") ||
    die "building or importing the images failed (see above)"
}

# ours_mounts: the mount points under the state directory, deepest first.
ours_mounts() {
  awk -v d="$CTR_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

cmd_down() {
  need_root down
  local pid
  if pid="$(running_pid)"; then
    if [[ -x "$CRICTL_BIN_DIR/crictl" ]]; then
      say "removing every pod (crictl rmp --all --force)"
      "$CRICTL_BIN_DIR/crictl" --config "$CTR_DIR/crictl.yaml" --timeout 30s rmp --all --force >/dev/null 2>&1 ||
        say "crictl rmp failed; stopping containerd anyway"
    fi
    say "stopping containerd (pid $pid)"
    kill -TERM "$pid"
    local i
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      say "containerd did not stop within 10 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  else
    say "containerd is not running"
  fi
  rm -f "$PID_FILE"
  # Shims of containers still there (crictl missing or failed): they are
  # ours when their command line names our socket.
  local p
  for p in /proc/[0-9]*; do
    if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -F -- "-address $SOCK " >/dev/null; then
      say "stopping the shim ${p#/proc/} left behind"
      kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
  done
  local m
  while read -r m; do
    [[ -n "$m" ]] || continue
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "could not unmount $m"
  done < <(ours_mounts)
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link del "$BRIDGE" && say "deleted the bridge $BRIDGE"
  fi
  say "containerd is down (images and snapshots stay in $CTR_DIR/root; rm -rf it to start afresh)"
}

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    printf '%-12s %s\n' containerd "running (pid $pid): $(version_line)"
    printf '%-12s %s\n' socket "unix://$SOCK"
    if [[ $EUID -eq 0 ]]; then
      printf '%-12s %s\n' pods "$(ctr_do -n k8s.io containers ls -q 2>/dev/null | wc -l) containers"
      printf '%-12s %s\n' images "$(ctr_do -n k8s.io images ls -q 2>/dev/null | grep -v '^sha256:' | tr '\n' ' ')"
    fi
  else
    printf '%-12s %s\n' containerd "not running (scripts/containerd.sh up)"
  fi
  printf '%-12s %s\n' network "bridge $BRIDGE, pods in $SUBNET"
  printf '%-12s %s\n' log "$LOG"
}

cmd_env() {
  [[ -f "$CONFIG" ]] || die "no containerd yet: run scripts/containerd.sh up"
  echo "export CONTAINERD_ADDRESS='$SOCK'"
  echo "export CONTAINERD_NAMESPACE=k8s.io"
  echo "export CRI_CONFIG_FILE='$CTR_DIR/crictl.yaml'"
  local path="$CRICTL_BIN_DIR"
  [[ -n "$BIN_PATH" ]] && path="$BIN_PATH:$path"
  echo "export PATH='$path':\"\$PATH\""
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
e2e_dir=""
if [[ "$cmd" == images && "${1:-}" == --e2e ]]; then
  [[ $# -ge 2 ]] || die "images --e2e needs a directory"
  e2e_dir="$2"
  shift 2
fi
[[ $# -eq 0 ]] || die "$cmd takes no arguments$([[ "$cmd" == images ]] && echo " but --e2e DIR")"
case "$cmd" in
  up) cmd_up ;;
  install) cmd_install ;;
  images) cmd_images "$e2e_dir" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) die "usage: scripts/containerd.sh up|install|images [--e2e DIR]|down|status|env" ;;
esac
