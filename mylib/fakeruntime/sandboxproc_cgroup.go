package fakeruntime

// A pod's sandbox process is in its pod's cgroup: in a child of the
// sandbox config's Linux.CgroupParent named after the sandbox ID, as
// containerd puts a pod's containers (its pause container first) under
// the pod cgroup the kubelet's container manager made with the pod's
// memory, CPU and pids limits. The kernel then holds the process to them:
// at the memory limit its OOM killer ends the process, and that pod's
// containers are OOMKilled, no other pod's.
//
// The cgroupfs driver's names only ("/kubepods/burstable/pod<uid>"), on
// cgroup v2 (/sys/fs/cgroup) or v1 (the memory, cpu, cpuacct and pids
// hierarchies under /sys/fs/cgroup/<controller>). A parent that is not
// there (no CgroupParent, a runtime driven by crictl, no cgroup
// filesystem) leaves the process in no cgroup of its own; the log says so
// once. (mylib/cm has the same mount table reader, but the runtime does not
// import it: it would bring the kubelet's packages with it.)

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupMount is where the cgroup filesystems are.
const cgroupMount = "/sys/fs/cgroup"

// podCgroup is a sandbox process's cgroup, in each hierarchy.
type podCgroup struct {
	dirs   []string // its directory in each hierarchy
	memory string   // the one with the memory controller's files
	v2     bool
}

// errNoCgroup: the pod's process runs in no cgroup of its own.
var errNoCgroup = errors.New("no cgroup")

// newPodCgroup makes the cgroup name under parent, in every hierarchy
// where parent is.
func newPodCgroup(parent, name string) (*podCgroup, error) {
	if parent == "" {
		return nil, fmt.Errorf("%w: the pod sandbox has no CgroupParent", errNoCgroup)
	}
	if strings.HasSuffix(parent, ".slice") {
		return nil, fmt.Errorf("%w: CgroupParent %q is a systemd slice: the mock runtime knows the cgroupfs driver's names only", errNoCgroup, parent)
	}
	parent = path.Clean("/" + parent) // never above the hierarchy's root
	v2, v1, err := cgroupHierarchies()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoCgroup, err)
	}
	g := &podCgroup{v2: v2 != ""}
	var parents []string
	if v2 != "" {
		parents = []string{filepath.Join(v2, parent)}
	} else {
		for _, c := range []string{"memory", "cpu", "cpuacct", "pids"} {
			if mp, ok := v1[c]; ok && !slices.Contains(parents, filepath.Join(mp, parent)) {
				parents = append(parents, filepath.Join(mp, parent))
			}
		}
	}
	for _, p := range parents {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			continue // not in this hierarchy: the kubelet made it in the others
		}
		if g.v2 {
			// Its controllers for the children: a v2 cgroup's memory.events
			// is there only when its parent gives it the memory controller.
			for _, c := range []string{"+memory", "+cpu", "+pids"} {
				_ = os.WriteFile(filepath.Join(p, "cgroup.subtree_control"), []byte(c), 0) // one the kernel refuses is left out
			}
		}
		dir := filepath.Join(p, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			g.removeDirs()
			return nil, fmt.Errorf("cgroup %s: %w", dir, err)
		}
		g.dirs = append(g.dirs, dir)
		if _, err := os.Stat(filepath.Join(dir, g.memoryFile())); err == nil {
			g.memory = dir
		}
	}
	if len(g.dirs) == 0 {
		return nil, fmt.Errorf("%w: the pod cgroup %s is in no hierarchy under %s", errNoCgroup, parent, cgroupMount)
	}
	return g, nil
}

// memoryFile is the file that counts the OOM kills.
func (g *podCgroup) memoryFile() string {
	if g.v2 {
		return "memory.events"
	}
	return "memory.oom_control"
}

// cgroupHierarchies reads the mount table: cgroup v2's mount when it is
// on cgroupMount, else each v1 controller's hierarchy.
func cgroupHierarchies() (string, map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	v1 := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 {
			continue
		}
		switch tail[0] {
		case "cgroup2":
			if fields[4] == cgroupMount {
				return fields[4], nil, nil
			}
		case "cgroup":
			for _, opt := range strings.Split(tail[2], ",") {
				v1[opt] = fields[4]
			}
		}
	}
	if len(v1) == 0 {
		return "", nil, errors.New("no cgroup filesystem is mounted")
	}
	return "", v1, s.Err()
}

// add moves process pid into the cgroup, in every hierarchy.
func (g *podCgroup) add(pid int) error {
	for _, d := range g.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
	}
	return nil
}

// oomKills is how many processes of the cgroup the kernel's OOM killer
// has killed (0 when it cannot tell).
func (g *podCgroup) oomKills() uint64 {
	if g.memory == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(g.memory, g.memoryFile()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove removes the cgroup once its process has exited (the kernel may
// take a moment to let its last task go).
func (g *podCgroup) remove() error {
	var err error
	for range 100 {
		if err = g.removeDirs(); err == nil || !errors.Is(err, syscall.EBUSY) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

func (g *podCgroup) removeDirs() error {
	var errs []error
	for _, d := range g.dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
