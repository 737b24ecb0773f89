package cadvisor

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// MachineInfo is what the kubelet knows about its host: upstream's
// cadvisorapi.MachineInfo and VersionInfo in one struct (with RootFsInfo's
// capacity), read from the same files cAdvisor reads on Linux.
type MachineInfo struct {
	MachineID  string // /etc/machine-id
	SystemUUID string // /sys/class/dmi/id/product_uuid (readable by root only)
	BootID     string // /proc/sys/kernel/random/boot_id

	KernelVersion string // /proc/sys/kernel/osrelease
	OSImage       string // PRETTY_NAME in /etc/os-release

	NumCores                 int   // runtime.NumCPU()
	MemoryCapacity           int64 // bytes, MemTotal in /proc/meminfo
	EphemeralStorageCapacity int64 // bytes of the filesystem that holds rootDir

	// Mock is set by ReadMachineInfoOf with a MockMachine: the node is one of
	// the course's mock machines, and reports IDs of its own (NodeIDs).
	Mock bool
}

// NodeIDs are the machine ID, system UUID and boot ID the node nodeName
// reports. On the host they are the files' (as upstream's cAdvisor reads
// them). On a mock machine, or for a file that could not be read (the
// system UUID is root's), each is derived from the node's name instead
// (the course's choice; upstream reports nothing then): the same after a
// restart, and different for two nodes on one host. A derived boot ID
// mixes in the host's, so a mock node too "reboots" with its host.
func (m *MachineInfo) NodeIDs(nodeName string) (machineID, systemUUID, bootID string) {
	machineID, systemUUID, bootID = m.MachineID, m.SystemUUID, m.BootID
	if m.Mock || machineID == "" {
		machineID = strings.ReplaceAll(nameUUID("machine-id", nodeName), "-", "") // /etc/machine-id's form
	}
	if m.Mock || systemUUID == "" {
		systemUUID = nameUUID("system-uuid", nodeName)
	}
	if m.Mock || bootID == "" {
		bootID = nameUUID("boot-id", nodeName+"/"+m.BootID)
	}
	return machineID, systemUUID, bootID
}

// nameUUID is a name-based UUID (SHA-1, version 5 of RFC 9562) of kind
// and name, in the usual 8-4-4-4-12 form.
func nameUUID(kind, name string) string {
	sum := sha1.Sum([]byte("mykubelet/" + kind + "/" + name))
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	h := hex.EncodeToString(u)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// ReadMachineInfo describes this host. rootDir is the kubelet's root directory
// (upstream: --root-dir, /var/lib/kubelet); the size of its filesystem is
// the node's ephemeral-storage capacity ("" leaves it 0: the container
// manager needs the CPUs and memory only). Files that cannot be read (the
// system UUID needs root) leave their field empty; the memory size is the
// one thing it must find. It is written for Linux, where the tutorial runs.
func ReadMachineInfo(rootDir string) (*MachineInfo, error) {
	m := &MachineInfo{
		MachineID:     firstLine("/etc/machine-id", "/var/lib/dbus/machine-id"),
		SystemUUID:    firstLine("/sys/class/dmi/id/product_uuid"),
		BootID:        firstLine("/proc/sys/kernel/random/boot_id"),
		KernelVersion: firstLine("/proc/sys/kernel/osrelease"),
		OSImage:       osImage("/etc/os-release"),
		NumCores:      runtime.NumCPU(),
	}
	mem, err := MemTotal("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	m.MemoryCapacity = mem
	if rootDir == "" {
		return m, nil
	}
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

// MemTotal reads MemTotal (in kB) from a meminfo file, as /proc/meminfo,
// and returns bytes: the machine's memory.
func MemTotal(path string) (int64, error) {
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

// ReadMachineInfoOf is ReadMachineInfo with the mock machine's set sizes in place
// of the host's: MemoryCapacity and EphemeralStorageCapacity (the nodefs);
// it is Mock, so the node's IDs are its own (NodeIDs).
// The image filesystem is not part of a node's capacity (upstream's node
// status has no imagefs figure either); it shows in the summary only. A
// zero mock is ReadMachineInfo.
func ReadMachineInfoOf(rootDir string, mock MockMachine) (*MachineInfo, error) {
	m, err := ReadMachineInfo(rootDir)
	if err != nil {
		return nil, err
	}
	if mock.MemoryCapacity > 0 {
		m.MemoryCapacity = mock.MemoryCapacity
	}
	if mock.NodeFsCapacity > 0 {
		m.EphemeralStorageCapacity = mock.NodeFsCapacity
	}
	m.Mock = !mock.IsZero()
	return m, nil
}
