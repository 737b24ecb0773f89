package readmewalk

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrInterrupted is the error of a walk stopped by Interrupt (Ctrl-C).
var ErrInterrupted = errors.New("interrupted")

// stepStopTimeout is how long the commands of a failed step have, after
// SIGTERM, to run their own cleanup (a script's EXIT trap) before the rest
// of what they started is killed.
const stepStopTimeout = 2 * time.Minute

// Interrupt stops the walk as Ctrl-C does in a learner's terminal: the step
// running now ends with ErrInterrupted, and Walk then stops what that step
// started and runs the README's undo commands. Safe from another
// goroutine (a signal handler); a second call does nothing.
func (w *Walker) Interrupt() {
	w.interruptOnce.Do(func() { close(w.interrupt) })
}

// Interrupted is closed by Interrupt.
func (w *Walker) Interrupted() <-chan struct{} { return w.interrupt }

func (w *Walker) isInterrupted() bool {
	select {
	case <-w.interrupt:
		return true
	default:
		return false
	}
}

// children maps each process on the machine to its children, from /proc.
func children() map[int][]int {
	kids := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // it exited
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		s := string(b)
		rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(rest) < 2 {
			continue
		}
		pid, err1 := strconv.Atoi(strings.Fields(s)[0])
		ppid, err2 := strconv.Atoi(rest[1])
		if err1 == nil && err2 == nil {
			kids[ppid] = append(kids[ppid], pid)
		}
	}
	return kids
}

// below returns the processes under pid (its children, theirs, …), leaving
// out the subtrees rooted at the pids in skip.
func below(kids map[int][]int, pid int, skip map[int]bool) []int {
	var out []int
	for _, c := range kids[pid] {
		if skip[c] {
			continue
		}
		out = append(out, c)
		out = append(out, below(kids, c, skip)...)
	}
	return out
}

// stopStep ends what the command running in the session started and left
// running, as a learner's Ctrl-C in that terminal would, and more surely:
// a build a timeout cut short, a script waiting for a cluster. The
// session's own jobs (its children) get SIGTERM first, so that scripts run
// their cleanup; after that, every process that was under them is killed.
// The programs in the background (other terminals) are left alone: the
// caller stops them.
func (w *Walker) stopStep(s *session) {
	if s == nil || s.cmd.Process == nil {
		return
	}
	skip := map[int]bool{}
	for _, p := range w.procs {
		skip[p.pid] = true
	}
	w.stopUnder(s.cmd.Process.Pid, skip)
}

// stopUnder ends what runs under the shell shell, but the processes in
// skip and theirs: SIGTERM to its children, time for their traps, then
// SIGTERM and SIGKILL to every process of the tree.
func (w *Walker) stopUnder(shell int, skip map[int]bool) {
	kids := children()
	tree := below(kids, shell, skip)
	if len(tree) == 0 {
		return
	}
	var top []int
	for _, c := range kids[shell] {
		if !skip[c] {
			top = append(top, c)
		}
	}
	w.show("  (stopping what the step started: %d processes)", len(tree))
	for _, pid := range top {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(stepStopTimeout)
	for time.Now().Before(deadline) && anyAlive(top) {
		time.Sleep(100 * time.Millisecond)
	}
	// What they started and left (a go build whose script is gone is
	// under init now, not under the session): everything of the first
	// look, and whatever is under the session still.
	kids = children()
	for _, pid := range append(tree, below(kids, shell, skip)...) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && anyAlive(tree) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, pid := range tree {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func anyAlive(pids []int) bool {
	for _, p := range pids {
		if alive(p) {
			return true
		}
	}
	return false
}

// undo runs, newest first, the undo= commands of the steps a failed walk
// of one README ran (scripts/containerd.sh down for the step that started
// containerd): what the README started does not outlive the failure, and
// a walk started again begins from what it expects. Each runs in a bash of
// its own, in the walk's directory and environment.
func (w *Walker) undo(cmds []string, readme string) {
	for i := len(cmds) - 1; i >= 0; i-- {
		w.show("$ %s   (undo: what %s started, after the failure)", cmds[i], readme)
		cmd := exec.Command("bash", "-c", cmds[i])
		cmd.Dir, cmd.Env = w.Dir, w.Env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := runWithTimeout(cmd, 3*time.Minute)
		w.showOutput(out)
		w.Log("%s: undo %q: %v", readme, cmds[i], err)
		if err != nil {
			w.show("  (undo failed: %v)", err)
		}
	}
}

// runWithTimeout runs cmd, its stdout and stderr together, and kills its
// process group if it has not ended within timeout.
func runWithTimeout(cmd *exec.Cmd, timeout time.Duration) (string, error) {
	var buf lockedBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return buf.String(), err
	case <-time.After(timeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return buf.String(), fmt.Errorf("timed out after %s", timeout)
	}
}

// The journal is what a tour has running or would undo, on disk, so that
// a tour killed outright (SIGKILL, a closed laptop, a lost SSH session)
// is cleaned up by the next one: JournalPath's file, rewritten whenever a
// background program starts or stops and whenever a step with undo= runs.
type journal struct {
	Session    journalProc   `json:"session"`    // the README's shell: the step it runs, under it
	Background []journalProc `json:"background"` // process groups of the programs in other terminals
	Undo       []string      `json:"undo"`       // the current README's undo= commands, oldest first
	Readme     string        `json:"readme"`
	Env        []string      `json:"env"` // the README's environment (KUBECONFIG, PATH), for its undo
}

type journalProc struct {
	Name  string `json:"name"`
	Pid   int    `json:"pid"`
	Start string `json:"start"` // /proc/PID/stat's start time: a pid used again is not ours
}

// startTime is field 22 of /proc/pid/stat, or "" when pid is gone.
func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

func (w *Walker) saveJournal(undo []string, readme string) {
	if w.JournalPath == "" {
		return
	}
	j := journal{Undo: undo, Readme: readme, Env: w.Env}
	if w.sessionPid > 0 {
		j.Session = journalProc{Name: "shell", Pid: w.sessionPid, Start: startTime(w.sessionPid)}
	}
	for _, p := range w.procs {
		j.Background = append(j.Background, journalProc{Name: p.name, Pid: p.pid, Start: startTime(p.pid)})
	}
	b, _ := json.Marshal(j)
	if err := os.MkdirAll(filepath.Dir(w.JournalPath), 0o700); err == nil {
		_ = os.WriteFile(w.JournalPath, b, 0o600)
	}
}

// ClearJournal removes the journal: nothing is left to clean up.
func (w *Walker) ClearJournal() {
	if w.JournalPath != "" {
		_ = os.Remove(w.JournalPath)
	}
}

// Recover cleans up after a tour that did not end (its journal is still
// there): it stops the background programs it left, if they still run,
// then the step its shell still runs, and runs the undo= commands of the
// README it was in. It reports what it
// did, or false when there was nothing to do.
func (w *Walker) Recover() bool {
	if w.JournalPath == "" {
		return false
	}
	b, err := os.ReadFile(w.JournalPath)
	if err != nil {
		return false
	}
	var j journal
	if err := json.Unmarshal(b, &j); err != nil {
		w.ClearJournal()
		return false
	}
	w.show("\033[1m--- the last tour did not end (in %s): cleaning up what it left\033[0m", j.Readme)
	for _, p := range j.Background {
		if p.Start == "" || startTime(p.Pid) != p.Start {
			continue
		}
		w.show("^C   (in the terminal of %s, pid %d, left by the last tour)", p.Name, p.Pid)
		_ = syscall.Kill(-p.Pid, syscall.SIGINT)
		deadline := time.Now().Add(DefaultStopTimeout)
		for alive(p.Pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
	// The step it was in goes on under its shell, which outlived the tour
	// (conformance.sh, with its own cluster and containerd): it is stopped
	// as a failed step is, its traps given their time.
	if p := j.Session; p.Pid > 0 && p.Start != "" && startTime(p.Pid) == p.Start {
		w.stopUnder(p.Pid, nil)
		_ = syscall.Kill(p.Pid, syscall.SIGKILL)
	}
	env := w.Env
	if len(j.Env) > 0 {
		w.Env = j.Env
	}
	w.undo(j.Undo, j.Readme)
	w.Env = env
	w.ClearJournal()
	return true
}
