package sandboxproc

// The sandbox process's seccomp filter: the system calls no pod's command
// needs and a code-execution bug would want, each refused with EPERM, as
// containerd's default profile (contrib/seccomp) refuses them to a
// container without CAP_SYS_ADMIN.

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// deniedSyscalls are refused with EPERM: file handles (open_by_handle_at
// opens any inode of a file system the process can name, outside its
// root), namespaces and mounts, keys, bpf, userfaultfd, ptrace, kexec,
// modules, the clock, swap, reboot, accounting, io_uring and the like.
var deniedSyscalls = []uintptr{
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
	unix.SYS_UNSHARE, unix.SYS_SETNS, unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_BPF, unix.SYS_USERFAULTFD, unix.SYS_PERF_EVENT_OPEN,
	unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV, unix.SYS_KCMP,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_ACCT, unix.SYS_SYSLOG, unix.SYS_QUOTACTL,
	unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME, unix.SYS_PERSONALITY, unix.SYS_VHANGUP, unix.SYS_FANOTIFY_INIT,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
}

// auditArch is the architecture the filter lets through (AUDIT_ARCH_*);
// any other (x86-64's 32-bit entry points) is refused, as containerd's.
var auditArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}

// x32SyscallBit marks x86-64's x32 system calls, another table of numbers.
const x32SyscallBit = 0x40000000

// SeccompFilter is the filter as classic BPF: the architecture checked,
// the x32 numbers refused, clone with CLONE_NEWUSER refused (a new user
// namespace from inside), clone3 ENOSYS (its flags are behind a pointer
// the filter cannot read: callers fall back to clone, as under
// containerd), each denied call EPERM, anything else allowed.
func SeccompFilter() ([]unix.SockFilter, error) {
	arch, ok := auditArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("seccomp: no filter for %s", runtime.GOARCH)
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	eperm := unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	enosys := unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	// seccomp_data: nr at 0, arch at 4, args from 16 (little endian: an
	// argument's low 32 bits first).
	p := []unix.SockFilter{
		{Code: ld, K: 4},
		{Code: jeq, Jt: 1, K: arch},
		{Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: ld, K: 0},
		{Code: jge, Jf: 1, K: x32SyscallBit},
		{Code: ret, K: eperm},
		{Code: jeq, Jf: 1, K: unix.SYS_CLONE3},
		{Code: ret, K: enosys},
		{Code: jeq, Jf: 4, K: unix.SYS_CLONE},
		{Code: ld, K: 16},
		{Code: jset, Jf: 1, K: unix.CLONE_NEWUSER},
		{Code: ret, K: eperm},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}
	for i, nr := range deniedSyscalls {
		// Each test jumps, on a match, past the tests left and the allow.
		p = append(p, unix.SockFilter{Code: jeq, Jt: uint8(len(deniedSyscalls) - i), K: uint32(nr)})
	}
	return append(p, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW}, unix.SockFilter{Code: ret, K: eperm}), nil
}

// seccompOff leaves the filter out: false in every build but the walls'
// test's (noseccomp_hook.go).
var seccompOff bool

// installSeccomp puts the filter on every thread of the process
// (TSYNC: Go runs many). It needs no_new_privs, which the runtime set.
func installSeccomp() error {
	f, err := SeccompFilter()
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}
