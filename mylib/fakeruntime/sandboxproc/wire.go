package sandboxproc

// sandboxEnv is the variable that makes the runtime's binary a sandbox
// process (see child.go); its value is the child's config.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
)

const SandboxEnv = "MYKUBELET_FAKERUNTIME_SANDBOX"

// RunSpec is one script to run in a container: its main process or an
// exec. It travels as JSON to the sandbox process.
type RunSpec struct {
	Op          string      `json:"op"`        // opRun, opTerm, opKill, opFault, opUsage, opUpdate
	ID          string      `json:"id"`        // the run
	Container   string      `json:"container"` // its container; the root is /<Container>/rootfs
	Script      string      `json:"script,omitempty"`
	Params      []string    `json:"params,omitempty"`
	Env         []string    `json:"env,omitempty"`
	WorkDir     string      `json:"workDir,omitempty"`
	Hostname    string      `json:"hostname,omitempty"`
	PodIP       string      `json:"podIP,omitempty"`
	Stdin       bool        `json:"stdin,omitempty"`       // two descriptors come with it (stdin, output), not one
	Interactive bool        `json:"interactive,omitempty"` // a shell reading commands from stdin
	Prompt      string      `json:"prompt,omitempty"`
	Mounts      []MountSpec `json:"mounts,omitempty"` // its container's, pinned at its first run from /.mounts/<root>
	Fault       bool        `json:"fault,omitempty"`  // opFault: on or off
	Limits      RunLimits   `json:"limits"`
	PIDTarget   string      `json:"pidTarget,omitempty"` // the container whose PID namespace it shares
	PodPID      string      `json:"podPID,omitempty"`    // the sandbox whose PID namespace it shares (pid_namespace.go)
	Process     []string    `json:"process,omitempty"`   // the command line ps lists the run as
}

// The requests; an exit comes back as a runExit.
const (
	OpRun   = "run"
	OpTerm  = "term"
	OpKill  = "kill"
	OpFault = "fault"
	OpUsage = "usage" // answered by runExits with Usages, the last with More false
	// OpUpdate gives a running container new memory and CPU limits
	// (UpdateContainerResources); Limits.Pids is not read.
	OpUpdate = "update"
)

// RunLimits are the container's limits (see shell_limits.go), which the sandbox
// process enforces on its scripts. The CPU limit comes only to a sandbox
// process in no cgroup (see shell_usage.go): in its pod's cgroup, the
// kernel enforces it.
type RunLimits struct {
	Pids      int64 `json:"pids"`
	Memory    int64 `json:"memory"`
	CPUQuota  int64 `json:"cpuQuota,omitempty"`  // µs of CPU every CPUPeriod, as the CRI's CpuQuota; 0: none
	CPUPeriod int64 `json:"cpuPeriod,omitempty"` // µs, as the CRI's CpuPeriod
}

// RunExit is the sandbox process's answer: run ID ended with Code, its
// container having used Usage; or, to an opUsage request ID, some of its
// containers' usages, by container ID.
type RunExit struct {
	ID     string                 `json:"id"`
	Code   int                    `json:"code"`
	Reason string                 `json:"reason,omitempty"` // "" or ReasonOOMKilled
	Usage  *ScriptUsage           `json:"usage,omitempty"`
	Usages map[string]ScriptUsage `json:"usages,omitempty"`
	More   bool                   `json:"more,omitempty"` // more usages follow
}

// SandboxConfig is the sandbox process's start-up configuration.
type SandboxConfig struct {
	Dir   string `json:"dir"`   // a directory of the host it mounts its root on, in its own mount namespace
	NoNet bool   `json:"noNet"` // it has a network namespace of its own, empty
	UID   int    `json:"uid"`   // its user and group: its pod's (sandboxproc_uid.go)
	// RootUID is the host's user (and group) its user namespace maps its
	// root, 0, to: the root stand-in (sandboxproc_uid.go). 0: it has no
	// user namespace of its own (none could be made).
	RootUID int `json:"rootUID,omitempty"`
}

// IDMap is the user namespace's map, for uids as for gids, of a sandbox
// process whose pod's user is uid: its root is the root stand-in, and its
// pod's user is itself; no other id of the host is there. So a file of
// root's, on a mount idmapped with this namespace (sandboxproc_pod.go),
// is its root's, whose files its CAP_DAC_READ_SEARCH reads; a file of its
// pod's user is its user's; any other is nobody's.
func IDMap(rootUID, uid int) string {
	return fmt.Sprintf("0 %d 1\n%d %d 1\n", rootUID, uid, uid)
}

// ReadyID is the sandbox process's first message: walled in, ready.
const ReadyID = "ready"

// An answer to opUsage comes in parts of at most usagesPerMessage
// containers (a part is one socket message, read into a 64 KiB buffer),
// and at most maxUsageParts of them.
const (
	UsagesPerMessage = 200
	MaxUsageParts    = 64
)

// A script's stdout and stderr share one pipe to the runtime, in frames:
// one byte for the stream (1 or 2), two for the length, then the bytes.
// Two pipes would lose the order of `echo one; echo two >&2; echo three`,
// which the log and kubectl logs keep.
const (
	FrameHeader = 3
	MaxFrame    = 4<<10 - FrameHeader // a frame is one atomic pipe write
)

// frameWriter writes one stream of a script into the shared pipe.
type frameWriter struct {
	mu     *sync.Mutex // shared by the two streams
	f      *os.File
	stream byte
}

func (w frameWriter) Write(p []byte) (int, error) {
	n := 0
	buf := make([]byte, 0, FrameHeader+min(len(p), MaxFrame))
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxFrame)]
		buf = append(buf[:0], w.stream, byte(len(chunk)>>8), byte(len(chunk)))
		buf = append(buf, chunk...)
		w.mu.Lock()
		_, err := w.f.Write(buf)
		w.mu.Unlock()
		if err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// CloseFiles closes each file that is not nil.
func CloseFiles(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// Where the runtime binds a container's files in its pod's sandbox
// process: its rootfs at /<id>/rootfs, its mount i at /.mounts/<id>/<i>
// (a directory, or a file for a file mount). The process's root is a
// tmpfs of its own (child.go) that holds nothing else.
func BoundRootfs(id string) string { return "/" + id + "/rootfs" }

func BoundMounts(id string) string { return "/" + MountsDir + "/" + id }

func BoundMount(id string, i int) string { return BoundMounts(id) + "/" + strconv.Itoa(i) }

const (
	// SandboxUIDBase is the first user (and group) a pod's sandbox
	// process may run as.
	SandboxUIDBase = 200000
	// SandboxUIDCount is how many there are: as many pods at once on
	// every mock runtime of the machine together.
	SandboxUIDCount = 50000
)

// ErrNoPodNetwork: the runtime was not asked for a pod network.
var ErrNoPodNetwork = errors.New("the runtime has no pod network (Config.PodNetwork is off)")
