// Package chaptertest runs a long-running chapter binary in an end-to-end
// test: start it, wait for lines it prints, stop it with Ctrl-C (SIGINT) as
// a learner would, and read what it printed.
package chaptertest

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a chapter binary running in the background.
type Process struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdout *buffer
	stderr *buffer
	done   chan struct{}
	err    error
}

// Start runs bin with args and a clean environment (no KUBECONFIG, an empty
// HOME). The process is interrupted, if still running, when the test ends.
func Start(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	p := &Process{t: t, cmd: cmd, stdout: &buffer{}, stderr: &buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if p.Running() {
			p.Stop()
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", bin, p.Stdout(), p.Stderr())
		}
	})
	return p
}

// Stdout and Stderr return what the process printed so far.
func (p *Process) Stdout() string { return p.stdout.String() }
func (p *Process) Stderr() string { return p.stderr.String() }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// WaitForOutput waits until stdout matches re and returns the match; it
// fails the test after timeout or if the process exits first.
func (p *Process) WaitForOutput(re string, timeout time.Duration) string {
	p.t.Helper()
	return p.waitFor(p.stdout, "stdout", re, timeout)
}

// WaitForLog is WaitForOutput for stderr (klog).
func (p *Process) WaitForLog(re string, timeout time.Duration) string {
	p.t.Helper()
	return p.waitFor(p.stderr, "stderr", re, timeout)
}

func (p *Process) waitFor(b *buffer, name, re string, timeout time.Duration) string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		if m := rx.FindString(b.String()); m != "" {
			return m
		}
		if !p.Running() {
			p.t.Fatalf("process exited (%v) before its %s matched %q", p.err, name, re)
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not match %q within %s", name, re, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop sends SIGINT (Ctrl-C) and waits up to 20 s for the exit; it returns
// the exit code (-1 if it had to be killed).
func (p *Process) Stop() int {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT) // fails only if it already exited
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("process did not stop within 20 s of SIGINT")
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// buffer is a strings.Builder safe for the process's writes and the test's reads.
type buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
