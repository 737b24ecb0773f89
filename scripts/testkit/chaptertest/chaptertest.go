// Package chaptertest runs a chapter binary in an end-to-end test: start it,
// wait for lines it prints, stop it with Ctrl-C (SIGINT) as a learner would,
// and read what it printed; or run it once to completion (Run). It also holds
// the fixtures the chapters' end-to-end tests share (fixtures.go).
package chaptertest

import (
	"errors"
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

// CleanEnv is the environment Start and Run give a chapter: the test's PATH,
// an empty HOME and nothing else (no KUBECONFIG).
func CleanEnv(t testing.TB) []string {
	return []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
}

// Start runs bin with args and CleanEnv. The process is interrupted, if still
// running, when the test ends.
func Start(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return StartWithEnv(t, CleanEnv(t), bin, args...)
}

// StartWithEnv is Start with the environment env, used as is (os.Environ()
// gives the chapter the test's own environment, KUBECONFIG included).
func StartWithEnv(t testing.TB, env []string, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
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
	return p.waitFor(p.stdout, "stdout", re, 0, timeout)[0]
}

// WaitForSubmatch waits until stdout holds more than n matches of re and
// returns match n (0 is the first) with its submatches: the whole match,
// then re's groups. It fails like WaitForOutput.
func (p *Process) WaitForSubmatch(re string, n int, timeout time.Duration) []string {
	p.t.Helper()
	return p.waitFor(p.stdout, "stdout", re, n, timeout)
}

// WaitForLog is WaitForOutput for stderr (klog).
func (p *Process) WaitForLog(re string, timeout time.Duration) string {
	p.t.Helper()
	return p.waitFor(p.stderr, "stderr", re, 0, timeout)[0]
}

func (p *Process) waitFor(b *buffer, name, re string, n int, timeout time.Duration) []string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		// Read whether it runs before reading the output, so that output
		// written just before the exit is still seen.
		running := p.Running()
		if m := rx.FindAllStringSubmatch(b.String(), n+1); len(m) > n {
			return m[n]
		}
		if !running {
			p.t.Fatalf("process exited (%v) before its %s matched %q (match %d)", p.err, name, re, n)
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not match %q (match %d) within %s", name, re, n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop sends SIGINT (Ctrl-C) and waits up to 20 s for the exit; it returns
// the exit code (-1 if it had to be killed).
func (p *Process) Stop() int {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGINT) // fails only if it already exited
	return p.wait(20*time.Second, " of SIGINT")
}

// Wait waits up to timeout for the process to exit by itself and returns
// its exit code; after timeout it kills it, fails the test and returns -1.
func (p *Process) Wait(timeout time.Duration) int {
	p.t.Helper()
	return p.wait(timeout, "")
}

func (p *Process) wait(timeout time.Duration, after string) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("process did not exit within %s%s", timeout, after)
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Run runs bin with args and CleanEnv to completion and returns its stdout,
// stderr and exit code. It fails the test if bin cannot be run at all.
func Run(t testing.TB, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = CleanEnv(t)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", bin, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// RunOK is Run for a run that must succeed: it fails the test, showing what
// bin printed, unless bin exits 0.
func RunOK(t testing.TB, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, code := Run(t, bin, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit code %d\nstdout:\n%s\nstderr:\n%s", bin, strings.Join(args, " "), code, stdout, stderr)
	}
	return stdout, stderr
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
