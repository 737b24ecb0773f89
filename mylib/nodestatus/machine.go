package nodestatus

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine is what the kubelet knows about its host. Upstream gets it from
// cAdvisor (MachineInfo and VersionInfo); here ReadMachine reads the same
// files cAdvisor reads on Linux.
type Machine struct {
	MachineID  string // /etc/machine-id
	SystemUUID string // /sys/class/dmi/id/product_uuid (readable by root only)
	BootID     string // /proc/sys/kernel/random/boot_id

	KernelVersion string // /proc/sys/kernel/osrelease
	OSImage       string // PRETTY_NAME in /etc/os-release

	NumCores                 int   // runtime.NumCPU()
	MemoryCapacity           int64 // bytes, MemTotal in /proc/meminfo
	EphemeralStorageCapacity int64 // bytes of the filesystem that holds rootDir
}

// ReadMachine describes this host. rootDir is the kubelet's root directory
// (upstream: --root-dir, /var/lib/kubelet); the size of its filesystem is
// the node's ephemeral-storage capacity. Files that cannot be read (the
// system UUID needs root) leave their field empty; the memory size is the
// one thing it must find. It is written for Linux, where the tutorial runs.
func ReadMachine(rootDir string) (*Machine, error) {
	m := &Machine{
		MachineID:     firstLine("/etc/machine-id", "/var/lib/dbus/machine-id"),
		SystemUUID:    firstLine("/sys/class/dmi/id/product_uuid"),
		BootID:        firstLine("/proc/sys/kernel/random/boot_id"),
		KernelVersion: firstLine("/proc/sys/kernel/osrelease"),
		OSImage:       osImage("/etc/os-release"),
		NumCores:      runtime.NumCPU(),
	}
	mem, err := memTotal("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	m.MemoryCapacity = mem
	if m.EphemeralStorageCapacity, err = filesystemSize(rootDir); err != nil {
		return nil, err
	}
	return m, nil
}

// firstLine returns the first line of the first readable file, trimmed.
func firstLine(paths ...string) string {
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		line, _, _ := bytes.Cut(b, []byte("\n"))
		return strings.TrimSpace(string(line))
	}
	return ""
}

// osImage returns PRETTY_NAME from an os-release file, or "" when absent.
func osImage(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "PRETTY_NAME="); ok {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// memTotal reads MemTotal (in kB) from a meminfo file and returns bytes.
func memTotal(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read memory size: %w", err)
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: bad MemTotal %q: %w", path, fields[1], err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("%s: no MemTotal line", path)
}

// MockMachine is the mock machine's size, the course's own knob (the
// flags --fake-memory-capacity, --fake-nodefs-capacity and
// --fake-imagefs-capacity; upstream's kubelet has none): a learner makes a
// small node and fills it. A zero field is the host's figure. With a
// field set, the node's capacity is that figure and its usage is what the
// mock runtime accounts for (the pods' working sets, writable layers,
// emptyDirs and logs, the images' sizes), not the host's.
type MockMachine struct {
	// MemoryCapacity is the node's memory, in bytes.
	MemoryCapacity int64
	// NodeFsCapacity is the size of the kubelet's filesystem (nodefs, the
	// node's ephemeral-storage capacity), in bytes.
	NodeFsCapacity int64
	// ImageFsCapacity is the size of the runtime's image filesystem
	// (imagefs), in bytes.
	ImageFsCapacity int64
}

// IsZero reports whether m changes nothing (the host's figures throughout).
func (m MockMachine) IsZero() bool { return m == MockMachine{} }

// ReadMachineOf is ReadMachine with the mock machine's set sizes in place
// of the host's: MemoryCapacity and EphemeralStorageCapacity (the nodefs).
// The image filesystem is not part of a node's capacity (upstream's node
// status has no imagefs figure either); it shows in the summary only. A
// zero mock is ReadMachine.
func ReadMachineOf(rootDir string, mock MockMachine) (*Machine, error) {
	m, err := ReadMachine(rootDir)
	if err != nil {
		return nil, err
	}
	if mock.MemoryCapacity > 0 {
		m.MemoryCapacity = mock.MemoryCapacity
	}
	if mock.NodeFsCapacity > 0 {
		m.EphemeralStorageCapacity = mock.NodeFsCapacity
	}
	return m, nil
}
