package fakeruntime

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// ExecSync runs a command in a running container, in the same interpreter
// as its main process, against its root directory and environment, and
// answers its exit code, stdout and stderr. `sh -c SCRIPT` runs SCRIPT;
// any other command runs as a simple command (see Utilities). With a
// timeout (seconds, on the runtime's clock), a command still running then
// is cancelled and the call fails with DeadlineExceeded, as containerd's.
func (r *Runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "ExecSync: cmd is empty")
	}
	script, params, err := sandboxproc.ArgvScript(req.GetCmd())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ExecSync: cmd: %v", err)
	}
	r.mu.Lock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING || c.fs == nil {
		r.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "ExecSync %s: container is %s, not running", short(c.id), c.state)
	}
	if err := c.findProgram(req.GetCmd()[0]); err != nil {
		r.mu.Unlock()
		return nil, status.Error(codes.Unknown, err.Error())
	}
	stdout, stderr := lockedBuffer{max: maxExecSyncOutput}, lockedBuffer{max: maxExecSyncOutput}
	var run func(ctx context.Context) int
	if r.sandbox == nil {
		p := sandboxproc.NewProc(scriptClock{r.clock}, c.fs, c.hostname, c.env, &stdout, &stderr, &c.running)
		p.WorkDir = c.workDir
		p.Net = r.containerNet(c)
		p.Process = sandboxproc.ProcessOf(req.GetCmd())
		run = func(ctx context.Context) int { return p.Run(ctx, script, params) }
	} else {
		spec := r.spec(c, script, params) // read c under mu
		spec.Process = sandboxproc.ProcessOf(req.GetCmd())
		run = func(ctx context.Context) int { return r.sandbox.exec(ctx, spec, nil, &stdout, &stderr) }
	}
	killed := c.done // the container's end ends the exec too
	r.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timedOut := make(chan struct{})
	if t := req.GetTimeout(); t > 0 {
		timer := r.clock.NewTimer(time.Duration(t) * time.Second)
		defer timer.Stop()
		go func() {
			select {
			case <-timer.C():
				close(timedOut)
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	go func() {
		select {
		case <-killed:
			cancel()
		case <-ctx.Done():
		}
	}()
	code := run(ctx)
	select {
	case <-timedOut:
		return nil, status.Errorf(codes.DeadlineExceeded, "ExecSync %s: command %q timed out after %ds", short(req.GetContainerId()), req.GetCmd(), req.GetTimeout())
	default:
	}
	out, errOut := fitExecSyncReply(stdout.Bytes(), stderr.Bytes())
	return &runtimeapi.ExecSyncResponse{Stdout: out, Stderr: errOut, ExitCode: int32(code)}, nil
}

// findProgram says whether c's image has the program an exec runs: an
// image with Programs (the pause image) has those alone, no shell, and
// an exec of any other command fails to start, as runc answers it
// through containerd ("executable file not found in $PATH"; kubectl
// exec prints it and exits 1). The mock runs the others itself: an
// exec of a listed program runs as any command does. Caller holds mu.
func (c *container) findProgram(name string) error {
	if c.programs == nil || slices.Contains(c.programs, name) {
		return nil
	}
	why := fmt.Sprintf("exec: %q: executable file not found in $PATH", name)
	if strings.Contains(name, "/") {
		why = fmt.Sprintf("exec: %q: stat %s: no such file or directory", name, name)
	}
	return fmt.Errorf("failed to exec in container: failed to start exec %q: OCI runtime exec failed: exec failed: unable to start container process: %s: unknown", newID(), why)
}

// maxExecSyncReply is the most the two streams of an ExecSync reply hold
// together: the kubelet's CRI client takes answers of at most 16 MiB
// (kuberuntime.MaxMsgSize), and the reply's framing (two fields' tags and
// lengths, the exit code) takes at most 21 bytes more. Unlike containerd,
// whose 16 MiB of each stream make a reply the kubelet refuses
// (ResourceExhausted: the probe or exec fails), the mock cuts the reply
// to fit.
const maxExecSyncReply = 16<<20 - 64

// fitExecSyncReply cuts the ends of stdout and stderr so that together
// they fit maxExecSyncReply: a stream shorter than half keeps all of it,
// the other the rest.
func fitExecSyncReply(stdout, stderr []byte) ([]byte, []byte) {
	if len(stdout)+len(stderr) <= maxExecSyncReply {
		return stdout, stderr
	}
	half := maxExecSyncReply / 2
	switch {
	case len(stderr) <= half:
		stdout = stdout[:maxExecSyncReply-len(stderr)]
	case len(stdout) <= half:
		stderr = stderr[:maxExecSyncReply-len(stdout)]
	default:
		stdout, stderr = stdout[:half], stderr[:maxExecSyncReply-half]
	}
	return stdout, stderr
}

// maxExecSyncOutput is how much of each stream ExecSync keeps: 16 MiB, as
// containerd's CRI plugin does since its fix for CVE-2022-31030 (a command
// that writes without end made containerd's memory grow without end).
// What comes after is dropped; the command goes on as if it was written.
// The reply then keeps what fits in one answer (maxExecSyncReply).
const maxExecSyncOutput = 16 << 20

// lockedBuffer is a bytes.Buffer a pipeline's commands may write at once,
// which keeps at most max bytes if max > 0 and drops the rest.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.max > 0 {
		room := max(b.max-b.buf.Len(), 0)
		_, err := b.buf.Write(p[:min(len(p), room)])
		return len(p), err
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// ReopenContainerLog closes the container's log file and opens its
// LogPath again: the kubelet calls it after renaming the file to rotate
// it. The container must be running, as with containerd.
func (r *Runtime) ReopenContainerLog(_ context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "ReopenContainerLog %s: container is %s, not running", short(c.id), c.state)
	}
	if err := c.log.reopen(); err != nil {
		return nil, status.Errorf(codes.Internal, "ReopenContainerLog %s: %v", short(c.id), err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// RuntimeConfig answers the runtime's cgroup driver, which the kubelet
// reads at start to match its own: systemd, as containerd's default.
func (r *Runtime) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}}, nil
}

// ContainerNet is c's. Caller holds mu.
func (r *Runtime) containerNet(c *container) *sandboxproc.ContainerNet {
	ip := ""
	if s := r.sandboxes[c.sandboxID]; s != nil {
		ip = s.ip
	}
	n := &sandboxproc.ContainerNet{PodIP: ip, NetErr: r.netErr, Fault: &c.fault, Traffic: &c.running.Traffic}
	if r.net != nil { // a nil *podnet.Network would be a Listener that is not nil
		n.Net = r.net
	}
	return n
}
