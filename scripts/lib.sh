# shellcheck shell=bash
# Shared settings for mykubelet's scripts. Source it; do not run it.
#
#   MYKUBELET_STATE_DIR  generated files: certs, keys, kubeconfigs, logs (git-ignored)
#   MYKUBELET_CACHE_DIR  built control-plane binaries, kept between runs and clones

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO_ROOT
KUBE_VERSION="v1.37.1"
export KUBE_VERSION
STATE_DIR="${MYKUBELET_STATE_DIR:-$REPO_ROOT/.state}"
# In the lima VM (vm.yaml) the checkout is on lima's mount of the host's home
# (9p, virtiofs or reverse-sshfs), which cannot hold the unix sockets every
# chapter from 05 makes in .state (lima-vm/lima#1824). There .state becomes a
# link to the VM's own disk, $MYKUBELET_GUEST_STATE_ROOT (/var/lib/mykubelet,
# made by vm.yaml) /state/<the checkout's path>, and STATE_DIR stays .state,
# as every README names it. A new link starts empty, like a new .state.
guest_local_state() { # before die and say: it prints its own lines
  local fs target
  [[ -z "${MYKUBELET_STATE_DIR:-}" && ! -L "$STATE_DIR" ]] || return 0
  fs="$(findmnt -n -o FSTYPE -T "$REPO_ROOT" 2>/dev/null)" || return 0
  case "$fs" in 9p | virtiofs | fuse.sshfs) ;; *) return 0 ;; esac
  [[ ! -e "$STATE_DIR" ]] || { echo "error: $STATE_DIR is a directory on this VM's $fs mount of your home, which cannot hold unix sockets: move it away (mv .state .state.host) and run this again, to make .state a link to the VM's own disk" >&2; exit 1; }
  target="${MYKUBELET_GUEST_STATE_ROOT:-/var/lib/mykubelet}/state$REPO_ROOT"
  { rm -rf "$target" && mkdir -p "$target" && chmod 0700 "$target"; } 2>/dev/null ||
    { echo "error: cannot make $target for .state (checkout on a $fs mount): is this the lima VM of vm.yaml? (it makes /var/lib/mykubelet) Else: sudo rm -rf $target, or set MYKUBELET_STATE_DIR" >&2; exit 1; }
  ln -s "$target" "$STATE_DIR" 2>/dev/null || [[ -L "$STATE_DIR" ]] || { echo "error: cannot link $STATE_DIR to $target" >&2; exit 1; }
  echo "==> .state is $target, on the VM's own disk (this checkout is on a $fs mount)" >&2
}
guest_local_state
CACHE_DIR="${MYKUBELET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mykubelet}"
BIN_DIR="$CACHE_DIR/control-plane-$KUBE_VERSION/bin"
export STATE_DIR CACHE_DIR BIN_DIR

# kube_ldflags: the -ldflags that stamp $KUBE_VERSION into a binary built
# from k8s.io/kubernetes (the control plane, upstream's kubelet), as
# upstream's hack/lib/version.sh does, with a fixed build date.
kube_ldflags() {
  local major minor pkg ldflags="-s -w"
  major="${KUBE_VERSION#v}"; major="${major%%.*}"
  minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ldflags"
}

die() { echo "error: $*" >&2; exit 1; }
say() { echo "==> $*" >&2; }

# warn_low_disk DIR: a warning when the file system of DIR (or of its
# parent, while DIR does not exist) has under 15 % free. There a kubelet
# with upstream's eviction thresholds (imagefs.available<15%: the mock
# runtime keeps its images in the state directory) reports DiskPressure,
# its node gets the disk-pressure:NoSchedule taint, and new pods stay
# Pending.
warn_low_disk() {
  local dir=$1 free
  [[ -e "$dir" ]] || dir="$(dirname "$dir")"
  free="$(df -P "$dir" 2>/dev/null | awk 'NR == 2 && $2 > 0 { printf "%d", 100 * $4 / $2 }')"
  if [[ -n "$free" ]] && ((free < 15)); then
    echo "warning: $dir is on a file system with $free % free: under 15 %, a kubelet reports DiskPressure (imagefs.available<15%) and no new pod is scheduled on its node (chapter 17, Troubleshooting)" >&2
  fi
  return 0
}

# slowest_packages RESULTS: the ten slowest packages of a `go test` output,
# one "    123.4s  ok pkg" line each. The last step reads all its input
# (awk, not head): head would exit after ten lines, and sort, writing the
# rest of a long list, would die of SIGPIPE, which pipefail makes the
# whole pipeline's exit status (141) even though every test passed.
slowest_packages() {
  grep -E '^(ok|FAIL)[[:space:]]+[^[:space:]]+[[:space:]]+[0-9.]+s' "$1" |
    awk '{t=$3; sub(/s$/, "", t); printf "    %8.1fs  %s %s\n", t, $1, $2}' | sort -rn | awk 'NR <= 10'
}

# parse_flags USAGE VALUE_FLAGS SWITCHES ARG...: a script's arguments. Each
# flag of VALUE_FLAGS ("--pods --max-pods") takes a value, which goes into
# the variable of its name (pods, max_pods); each of SWITCHES sets its
# variable to true. -h and --help print USAGE and exit 0; an unknown
# argument, or a value flag at the end, ends the script with USAGE.
parse_flags() {
  local usage=$1 values=" $2 " switches=" $3 " var
  shift 3
  while [[ $# -gt 0 ]]; do
    var=${1#--} && var=${var//-/_}
    if [[ $1 == -h || $1 == --help ]]; then
      echo "$usage"
      exit 0
    elif [[ $1 == --* && $values == *" $1 "* ]]; then
      [[ $# -ge 2 ]] || die "$1 needs a value ($usage)"
      printf -v "$var" '%s' "$2"
      shift 2
    elif [[ $1 == --* && $switches == *" $1 "* ]]; then
      printf -v "$var" '%s' true
      shift
    else
      die "unknown argument '$1' ($usage)"
    fi
  done
}

# whole_numbers VAR...: each variable holds a whole number above 0, or the
# script ends naming its flag (--max-pods for max_pods).
whole_numbers() {
  local v
  for v in "$@"; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "--${v//_/-} is a whole number above 0 (got '${!v}')"
  done
}

# free_ports N: N different loopback ports on which nothing answers now, on
# one line (for a control plane and nodes of a script's own, beside any
# other on this machine). They are below the kernel's range of ephemeral
# ports: a port there may be a connection's own end, on which nothing
# answers but which a server cannot bind (metrics-server of conformance.sh's
# control plane, during a README walk: "bind: address already in use").
free_ports() {
  local n="$1" p out=" " lo=32768 _hi
  read -r lo _hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
  ((lo >= 21000)) || lo=50000 # a range set unusually low: the ports as before
  for _ in $(seq $((n * 100))); do
    ((n > 0)) || break
    p=$((20000 + RANDOM % (lo - 20000)))
    if [[ "$out" != *" $p "* ]] && ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      out+="$p "
      n=$((n - 1))
    fi
  done
  ((n == 0)) || die "no free port found"
  out="${out# }"
  echo "${out% }"
}

# own_control_plane_ports N: free ports for a control plane of a script's
# own, exported as scripts/cluster.sh reads them, metrics-server's too (one
# already in the environment is another cluster's: a README walk's, whose
# step runs the script), and N more in the array OWN_PORTS for its kubelets.
own_control_plane_ports() {
  local ports=()
  read -ra ports <<<"$(free_ports $((6 + $1)))"
  ((${#ports[@]} == 6 + $1)) || exit 1 # free_ports said why
  export MYKUBELET_ETCD_PORT="${ports[0]}" MYKUBELET_ETCD_PEER_PORT="${ports[1]}" MYKUBELET_APISERVER_PORT="${ports[2]}" \
    MYKUBELET_CONTROLLER_MANAGER_PORT="${ports[3]}" MYKUBELET_SCHEDULER_PORT="${ports[4]}" MYKUBELET_METRICS_SERVER_PORT="${ports[5]}"
  # shellcheck disable=SC2034 # read by the scripts that source this file
  OWN_PORTS=("${ports[@]:6}")
}

# tail_logs DIR: the last lines of each log DIR/*.log that is not empty, on
# stderr (what a script's EXIT trap shows when it failed).
tail_logs() {
  local f
  for f in "$1"/*.log; do
    [[ -s "$f" ]] || continue
    echo "--- the last lines of $(basename "$f"):" >&2
    tail -n 8 "$f" >&2
  done
}

# go_progress WHAT GO-ARGS...: runs `go GO-ARGS` (a build, install or test
# -c, which can take many minutes the first time) and shows that it is
# moving, as it moves: what go prints besides package names at once (its
# downloads, its errors), and every 20 s a line with the time so far and,
# with -v among GO-ARGS, how many packages it has compiled. Its status is
# go's.
go_progress() {
  local what="$1" start=$SECONDS last=$SECONDS n=0 line rc
  shift
  go "$@" 2>&1 | while :; do
    if IFS= read -r -t 20 line; then
      if [[ ! "$line" =~ ^[A-Za-z0-9._/~+-]+$ ]]; then
        echo "$line" >&2
        continue
      fi
      n=$((n + 1))
    else
      rc=$?
      ((rc > 128)) || break # the end of go's output; else 20 s of silence
    fi
    if ((SECONDS - last >= 20)); then
      last=$SECONDS
      if ((n > 0)); then
        say "  $what: $((SECONDS - start)) s so far, $n packages compiled"
      else
        say "  $what: $((SECONDS - start)) s so far"
      fi
    fi
  done
  return "${PIPESTATUS[0]}"
}
