// Package fakeruntime is a container runtime without a kernel: it speaks the
// real CRI (k8s.io/cri-api runtime/v1) over gRPC, so the chapters can talk to
// it exactly as the kubelet talks to containerd, on a machine with no
// containers at all.
//
// It keeps sandboxes, containers and images in memory and follows the CRI
// state machine: RunPodSandbox makes a READY sandbox with an IP from the pod
// CIDR, StopPodSandbox makes it NOTREADY and kills its containers,
// CreateContainer makes a CREATED container with its own root directory,
// StartContainer runs it, and it is EXITED when its script ends (reason
// Completed or Error) or when it is stopped or killed (137).
// GetContainerEvents streams each of these changes to the kubelet's Evented
// PLEG as containerd does, with the sandbox's and its containers' statuses
// (cri_events.go); unlike containerd, a caller that falls
// ContainerEventQueueSize events behind is told (ResourceExhausted).
//
// A container's command (or its image's default, see KnownImages) runs as a
// POSIX shell script in mvdan.cc/sh/v3's interpreter inside this process,
// with a few utilities written in Go (see Utilities). Nothing of the host is
// ever executed, and every file the script touches is in the container's
// view (shell_fs.go): its root directory, or one of its CRI mounts, each an
// os.Root. Its stdout and stderr go to the container's
// LogPath in the CRI log format (ReadLog reads it back); ExecSync runs a
// command the same way (keeping 16 MiB of each stream, as containerd).
//
// The stats are what the scripts really use, counted as a cgroup counts a
// container's processes (shell_usage.go, cri_stats.go): CPU is the time
// the kernel ran their threads (a script works on a goroutine locked to an
// OS thread, whose per-thread CPU clock is read live: a busy loop burns, a
// sleep does not), UsageNanoCores the rate since the previous read of that
// container, as containerd's; memory is what the limits below charge; a
// sandbox sums its containers and reports, as its eth0's, the bytes its
// servers' connections read and wrote. What is not counted: the builtins
// of a pipeline's left side (the interpreter's own goroutine), the
// servers' request handling, the runtime's own work for a container,
// what a container with no CPU limit runs past its share of metered
// goroutines (maxMeteredPerContainer) or the process's (maxMeteredThreads;
// one with a limit waits for a metered one); and
// the network bytes are payload counted at the pod's sockets, not an
// interface's packets (the sandboxes share one veth, whose counters are
// every pod's).
//
// The runtime stands in for the kernel's limits (shell_limits.go): each
// container runs at most Config.PodPidsLimit processes (script, execs,
// utilities, background jobs; DefaultPodPidsLimit), is OOMKilled (137)
// past its memory limit (LinuxContainerResources.MemoryLimitInBytes, else
// the node's Config.MemoryCapacity, else DefaultContainerMemory), counted
// from its shell variables, its writable layer and what the stress
// utilities hold (stress --vm; agnhost stress, which grows step by step),
// is throttled to its CPU limit (CpuQuota every CpuPeriod, as the kernel's
// CFS bandwidth control does it) where no pod cgroup does it (sandboxproc's
// shell_usage.go), and may nest only so deep
// (maxStackFrames); every input of the parser, whichever builtin or
// wrapper (builtin, command) hands it over, is bounded before the parser
// recurses past a few MB of stack (boundedInput: maxScriptBytes,
// maxParseFrames), which would end the process; a panic in the interpreter ends only the script it ran
// (exit 2, "sh: internal error: …"). What the interpreter would ask the
// host ($HOME, ~user, pwd -P, . and source, its TMPDIR) is answered from
// the container (shell_hostfacts.go says what is not: $$ and $PPID).
//
// The mounts (cri_mounts.go): CreateContainer refuses (InvalidArgument) a
// mount whose host path, symlinks resolved, is not in one of
// Config.MountRoots (the kubelet's pods and host directories; none: no
// mount at all), holds the runtime's containers, or has a symlink below
// its mount root (a subPath a container turned into `../../../..`). Each
// mount is pinned there, once: walked down with O_NOFOLLOW, as upstream's
// safe subPath, and held open for the container's life; it is never
// looked up by its host path again (the runtime binds what it pinned into
// the pod's sandbox process, which uses it only if it is the same
// directory or file, device and inode). The container's view has a mount
// table, the longest container path winning: a directory mount is an
// os.Root of the pinned directory, whose symlinks are followed only inside
// it (the atomic writer's ..data links work, a link out of the mount, even
// into the same volume above a subPath, does not); a file mount (a
// subPath, /etc/hosts, the termination-message file) maps one name to the
// pinned file; a read-only mount refuses every change with EROFS; the
// mount points are made in the container's root, as runc makes them; tar
// measures a link's ".." from the mount it writes into. What
// a script writes into a mount is the volume's: it does not count against
// the container's memory. A sandbox's DnsConfig becomes each container's
// /etc/resolv.conf (unless a mount covers it) and its Hostname
// /etc/hostname, as containerd writes them.
//
// Pod YAML is untrusted input, and an interpreter can have bugs, so the
// handlers are not the only wall. A runtime that runs as root on the real
// clock (as the probe and capstone chapters run it) runs each pod's
// scripts in a sandbox process of that pod's own (sandboxproc.go), a
// small binary of the interpreter alone (package sandboxproc, built and
// opened once per runtime process; without the go toolchain, the
// runtime's own binary started again: sandboxproc_binary.go) behind
// walls the kernel keeps, each for one thing (the stats of its containers
// are read there, and asked for over its socket):
//
//	new mount, PID, IPC, UTS namespaces  no host process to see or signal; $$ is 1
//	pivot_root into a tmpfs of its own   no host file, even through the interpreter's own opens
//	its pod's files only, bound inside   no other pod's root or volume (nosuid, nodev, noexec)
//	a uid and gid of its own, no groups  no privilege of root; no signal to or from another pod's or user's process
//	no_new_privs                         no privilege regained through exec
//	rlimits: core 0, open files          no core dump on the host, no descriptor runaway
//	its pod's cgroup, when it has one    no more memory, CPU and processes than the pod's cgroup allows
//	the pod network's namespace          no host address but the gateway
//
// The process's root holds nothing of the host: as a container first runs
// there, the runtime clones its rootfs and each of its mounts (open_tree,
// the very directory or file it pinned at CreateContainer, never looked up
// by path again) into the process's mount namespace, at /<id>/rootfs and
// /.mounts/<id>/<i> (read-only when the mount is), and detaches them when
// the container's main script ended. A script reaches its own mounts only,
// through the mount table and an os.Root each; the bind mounts are the
// kernel's second wall, and the kubelet's modes the third (the pod's user
// reads what is 0644, and writes only into the 0777 emptyDirs and the 0666
// termination-message file). Between pods, the walls are the kernel's: a
// pod's process sees no other pod's files and runs as another user
// (SandboxUIDBase and up, each claimed with a lock file under
// /run/mykubelet/sandbox-uids, so that several runtimes of one machine
// never share one). With a CgroupParent (the kubelet's container manager
// makes the pod cgroups as root), the process is in <CgroupParent>/<sandbox
// ID>: at the pod's memory limit the kernel's OOM killer ends it, and its
// containers are OOMKilled, no other pod's; without one it runs in no
// cgroup of its own, and the log says so once.
//
// If it dies, its pod's containers have exited (137, Error) and the next
// start starts another. A runtime on a fake clock (tests) or not root runs
// the scripts in its own process: a clock cannot cross processes, and without
// root there is no privilege to give away (Config.Isolation).
//
// Where it departs from containerd, and why: a script that traps TERM runs its
// trap at the next command or sleep (the interpreter knows only EXIT and ERR
// traps); sleep (as GNU sleep: infinity, suffixes, summed arguments), date
// and every timeout read the injected clock, so tests
// drive them; Exec and Attach answer a URL of the runtime's own streaming
// server on 127.0.0.1 (streaming.go: SPDY, v4.channel.k8s.io), where `sh`
// with stdin is an interactive shell (with a TTY: a prompt, echo and line
// editing, best effort); Attach streams the output live and the input to a
// container created with Stdin (streaming_attach.go: a session whose input
// ended lasts until the process has read all of it, where containerd ends
// it at once); PortForward connects to the sandbox's IP inside the pod
// network (streaming_portforward.go; without one every port is refused); a
// mount's symlinks are followed only inside it, mount propagation is
// reported and not honoured, and a sandbox without a DnsConfig gives its
// containers no /etc/resolv.conf (containerd copies the host's) —
// cri_mounts.go says why.
//
// For teaching, a small HTTP control API (NewControlHandler) kills, stops,
// removes or execs in containers and sandboxes by ID or by pod name; it is
// served on a unix socket only its user can reach (ListenControl: mode 0600
// in a 0700 directory, SO_PEERCRED), never on TCP.
//
// The package is containerd's twin, and its files are grouped by
// component as containerd's are; each group is one part of the runtime:
//
//	cri_*.go         the CRI state machine and services: the Runtime and its Config
//	                 (cri_runtime.go), sandboxes, containers and their mounts
//	                 (cri_mounts.go), ExecSync, images and
//	                 their catalogue (KnownImages), stats, the CRI log format
//	                 (ReadLog, ParseLogLine), the gRPC server (Serve, ListenUnix,
//	                 ServeEndpoint) and the sample pods (Seed)
//	shell*.go        what a container runs: the interpreter glue (shell.go: argv,
//	                 signals, the commands it runs), the utilities written in Go
//	                 (shell_utilities.go), the file system: the container's
//	                 view, its root and its mounts (shell_fs.go), the guards against an
//	                 interpreter's panics (shell_guard.go), what it would ask the
//	                 host (shell_hostfacts.go), the kernel's limits
//	                 (shell_limits.go) and the server commands (shell_servers.go:
//	                 agnhost, goproxy, nginx, etcd)
//	streaming*.go    Exec and Attach: the streaming server on 127.0.0.1 and the
//	                 interactive shell behind it
//	control*.go      the control API: the actions (control.go: ContainerAction,
//	                 PodAction, …) and their HTTP handler and unix socket
//	                 (control_http.go: NewControlHandler, ListenControl)
//	sandboxproc*.go  the sandbox processes, one per pod: the runtime's side
//	                 (sandboxproc.go; the map of pods, their bind mounts:
//	                 sandboxproc_pod.go; their users: sandboxproc_uid.go; their
//	                 cgroups: sandboxproc_cgroup.go; their binary:
//	                 sandboxproc_binary.go)
//	sandboxproc/     the interpreter and the walled-in child, a package of its
//	                 own free of Kubernetes packages (cmd/sandbox: its binary)
//	podnet/          the pod network, a package of its own: the namespace, the
//	                 veth pair and the sandboxes' addresses
//	fakeruntimetest/ a runtime served for other packages' tests
//
// Wiring:
//
//	rt, err := fakeruntime.NewRuntime(fakeruntime.Config{StateDir: dir, // or New(clock.RealClock{})
//		MountRoots: []string{rootDir + "/pods", rootDir + "/host"}}) // the kubelet's: mounts come from there
//	err = rt.Seed(ctx)                      // two sample pods (optional)
//	lis, err := fakeruntime.ListenUnix(statedir.Path(stateDir, statedir.RuntimeSocket))
//	go rt.Serve(ctx, lis)                   // CRI gRPC until ctx ends, then Close
//	cl, err := fakeruntime.ListenControl(statedir.Path(stateDir, statedir.RuntimeControlSocket))
//	http.Serve(cl, fakeruntime.NewControlHandler(rt))
package fakeruntime
