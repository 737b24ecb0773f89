package readmewalk

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"time"
)

// A Build is what a README's command builds or installs the first time it
// runs on a machine: minutes of compiling (the control plane: 19 minutes on
// 2 cores) that no step's timeout allows, and that a learner should watch
// happen, not wait for in silence. The tour runs the builds its READMEs
// need before their first step, each with its output shown as it comes,
// and with no timeout; the README's command then finds them done.
type Build struct {
	What    string         // what it builds, for the transcript
	Prepare string         // the command the tour runs (bash, in the checkout)
	Root    bool           // only as root: the commands that use it refuse otherwise
	By      *regexp.Regexp // the README commands that build it on first use
}

// Builds are every first-use build of the course, in the order the tour
// runs them. TestEveryStepThatBuildsIsPrepared finds the README commands
// that can build (a go command, or a script subcommand that compiles or
// installs) and fails when one is not covered here.
var Builds = []Build{
	{
		What: "the course's Go programs: every `go run` and `go build` of the READMEs, the scripts' helpers, the mock runtime's sandbox binary",
		// The sandbox binary is built by the mock runtime with CGO_ENABLED=0
		// and -trimpath (mylib/fakeruntime/sandboxproc_binary.go), a build
		// of its own: the same flags here put it in Go's build cache.
		//
		// The libraries, not the commands: go build of a main package links
		// it, and a link is not cached (`go build ./...` linked some 30
		// programs on every walk, 4.5 minutes of CI with nothing to
		// compile). Each step's go run compiles its small main and links it
		// (Go caches what go run links), as it would have anyway.
		Prepare: `source scripts/lib.sh && libs=$(go list -f '{{if and .GoFiles (ne .Name "main")}}{{.ImportPath}}{{end}}' ./...) &&
  go_progress "the course's packages" build -v $libs &&
  CGO_ENABLED=0 GOFLAGS=-trimpath go_progress "the sandbox binary" build -v -o /dev/null ./mylib/fakeruntime/sandboxproc/cmd/sandbox`,
		By: regexp.MustCompile(`\bgo (run|build)\b|scripts/cluster\.sh up|scripts/(classroom|conformance)\.sh|scripts/containerd\.sh images`),
	},
	{
		What:    "the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) and metrics-server",
		Prepare: "scripts/build-control-plane.sh >/dev/null",
		By:      regexp.MustCompile(`scripts/cluster\.sh up|scripts/conformance\.sh`),
	},
	{
		What:    "chapter 19's runtime: containerd, runc and the CNI plugins (apt), crictl (go install)",
		Prepare: "scripts/containerd.sh install",
		Root:    true,
		By:      regexp.MustCompile(`scripts/containerd\.sh (up|images)|scripts/conformance\.sh`),
	},
	{
		// Chapter 19 moves its node to containerd v2 for an image volume.
		What:    "chapter 19's containerd v2 (MYKUBELET_CONTAINERD=v2: built from its Go module, once)",
		Prepare: "MYKUBELET_CONTAINERD=v2 scripts/containerd.sh install",
		Root:    true,
		By:      regexp.MustCompile(`MYKUBELET_CONTAINERD=v2 scripts/containerd\.sh (up|install|images)`),
	},
	{
		What:    "the offline images' builder (scripts/tools/images)",
		Prepare: `source scripts/lib.sh && cd scripts/tools/images && go_progress "the images' builder" build -v ./...`,
		By:      regexp.MustCompile(`scripts/containerd\.sh images|scripts/conformance\.sh`),
	},
	{
		What:    "upstream's e2e specs, ginkgo and the e2e images' programs",
		Prepare: "scripts/conformance.sh --build",
		Root:    true,
		By:      regexp.MustCompile(`scripts/conformance\.sh`),
	},
}

// BuildsFor returns the builds that the walked commands of readmes (paths
// relative to root) start on first use, in the order of builds. External:
// the steps marked local are not walked. asRoot: the builds that need root
// are left out without it (the steps that use them refuse to run).
func BuildsFor(root string, readmes []string, builds []Build, external, asRoot bool) ([]Build, error) {
	need := make([]bool, len(builds))
	for _, r := range readmes {
		md, err := os.ReadFile(root + "/" + r)
		if err != nil {
			return nil, err
		}
		steps, err := Parse(string(md))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		for _, st := range steps {
			if !st.Walked(external) {
				continue
			}
			for _, c := range st.Commands() {
				for i, b := range builds {
					if b.By.MatchString(c) {
						need[i] = true
					}
				}
			}
		}
	}
	var out []Build
	for i, b := range builds {
		if need[i] && (asRoot || !b.Root) {
			out = append(out, b)
		}
	}
	return out, nil
}

// Walked reports whether the walk runs the step's commands: run and
// background steps, not those marked local on another cluster nor those
// marked external on the local one.
func (s Step) Walked(external bool) bool {
	if (s.Local() && external) || (s.Attrs["external"] == "true" && !external) {
		return false
	}
	return s.Action == Run || s.Action == Background
}

// Commands are the commands a run or background step types.
func (s Step) Commands() []string {
	if IsConsole(s.Block) {
		var cmds []string
		for _, cc := range Console(s.Block) {
			cmds = append(cmds, cc.Command)
		}
		return cmds
	}
	return Commands(s.Block)
}

// Prepare runs each build in dir with env, its output written to out as it
// comes, one after the other, and stops at the first that fails. A build
// runs in a process group of its own: stop (closed by the caller, on
// Ctrl-C) ends the group, so that no build goes on after the tour.
func Prepare(dir string, env []string, builds []Build, out io.Writer, stop <-chan struct{}) error {
	for i, b := range builds {
		start := time.Now()
		fmt.Fprintf(out, "\n\033[1m--- before the first step, build %d of %d: %s\033[0m\n$ %s\n", i+1, len(builds), b.What, b.Prepare)
		cmd := exec.Command("bash", "-c", b.Prepare)
		cmd.Dir, cmd.Env = dir, env
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("building %s: %s: %w", b.What, b.Prepare, err)
			}
		case <-stop:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
			return fmt.Errorf("building %s: %w", b.What, ErrInterrupted)
		}
		fmt.Fprintf(out, "  (done in %s)\n", time.Since(start).Round(time.Second))
	}
	return nil
}
