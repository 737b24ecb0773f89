package cadvisor

import (
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadMachineInfoOf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ReadMachineInfo reads /proc")
	}
	dir := t.TempDir()
	host, err := ReadMachineInfo(dir)
	require.NoError(t, err)

	same, err := ReadMachineInfoOf(dir, MockMachine{})
	require.NoError(t, err)
	assert.Equal(t, host.MemoryCapacity, same.MemoryCapacity, "a zero mock is the host")
	assert.Equal(t, host.EphemeralStorageCapacity, same.EphemeralStorageCapacity)

	memOnly, err := ReadMachineInfoOf(dir, MockMachine{MemoryCapacity: 1 << 30, ImageFsCapacity: 1 << 20})
	require.NoError(t, err)
	assert.Equal(t, int64(1<<30), memOnly.MemoryCapacity)
	assert.Equal(t, host.EphemeralStorageCapacity, memOnly.EphemeralStorageCapacity, "an unset field keeps the host's figure")
	assert.Equal(t, host.NumCores, memOnly.NumCores)
	assert.Equal(t, host.BootID, memOnly.BootID)

	both, err := ReadMachineInfoOf(dir, MockMachine{MemoryCapacity: 2 << 30, NodeFsCapacity: 5 << 30})
	require.NoError(t, err)
	assert.Equal(t, int64(2<<30), both.MemoryCapacity)
	assert.Equal(t, int64(5<<30), both.EphemeralStorageCapacity)

	_, err = ReadMachineInfoOf("/no/such/dir", MockMachine{MemoryCapacity: 1 << 30})
	assert.Error(t, err, "the host is still read")
}

func TestMockMachineIsZero(t *testing.T) {
	assert.True(t, MockMachine{}.IsZero())
	assert.False(t, MockMachine{ImageFsCapacity: 1}.IsZero())
}

var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNodeIDsFromTheHostWhenReadable(t *testing.T) {
	m := &MachineInfo{MachineID: "0123456789abcdef0123456789abcdef", SystemUUID: "ec2a0b2c-1111-2222-3333-444455556666", BootID: "b00710d0-0000-4000-8000-000000000000"}
	machineID, systemUUID, bootID := m.NodeIDs("n1")
	assert.Equal(t, m.MachineID, machineID)
	assert.Equal(t, m.SystemUUID, systemUUID)
	assert.Equal(t, m.BootID, bootID)
}

func TestNodeIDsDerivedFromTheNodeNameWhenUnreadable(t *testing.T) {
	// Not root: product_uuid cannot be read.
	m := &MachineInfo{MachineID: "0123456789abcdef0123456789abcdef", BootID: "b00710d0-0000-4000-8000-000000000000"}
	_, a, _ := m.NodeIDs("node-a")
	_, again, _ := m.NodeIDs("node-a")
	_, b, _ := m.NodeIDs("node-b")
	assert.Regexp(t, uuidForm, a)
	assert.Equal(t, a, again, "stable: the same after a restart")
	assert.NotEqual(t, a, b, "two nodes on one host differ")
	machineID, _, bootID := m.NodeIDs("node-a")
	assert.Equal(t, m.MachineID, machineID, "what could be read is the host's")
	assert.Equal(t, m.BootID, bootID)
}

func TestNodeIDsOfAMockMachineAreTheNodesOwn(t *testing.T) {
	host := MachineInfo{MachineID: "0123456789abcdef0123456789abcdef", SystemUUID: "ec2a0b2c-1111-2222-3333-444455556666", BootID: "b00710d0-0000-4000-8000-000000000000", Mock: true}
	ma, ua, ba := host.NodeIDs("node-a")
	mb, ub, bb := host.NodeIDs("node-b")
	assert.Regexp(t, `^[0-9a-f]{32}$`, ma, "/etc/machine-id's form")
	assert.Regexp(t, uuidForm, ua)
	assert.Regexp(t, uuidForm, ba)
	assert.NotEqual(t, host.SystemUUID, ua)
	assert.NotEqual(t, ma, mb)
	assert.NotEqual(t, ua, ub)
	assert.NotEqual(t, ba, bb)

	rebooted := host
	rebooted.BootID = "b00710d0-0000-4000-8000-000000000001"
	ma2, ua2, ba2 := rebooted.NodeIDs("node-a")
	assert.Equal(t, ma, ma2)
	assert.Equal(t, ua, ua2)
	assert.NotEqual(t, ba, ba2, "a mock node reboots with its host")
}

func TestReadMachineInfoOfAMockIsMock(t *testing.T) {
	dir := t.TempDir()
	host, err := ReadMachineInfoOf(dir, MockMachine{})
	require.NoError(t, err)
	assert.False(t, host.Mock)
	mock, err := ReadMachineInfoOf(dir, MockMachine{MemoryCapacity: 1 << 30})
	require.NoError(t, err)
	assert.True(t, mock.Mock)
}

func TestReadMachineInfo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ReadMachineInfo reads /proc")
	}
	m, err := ReadMachineInfo(t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, runtime.NumCPU(), m.NumCores)
	assert.Greater(t, m.MemoryCapacity, int64(64<<20))
	assert.Greater(t, m.EphemeralStorageCapacity, int64(0))
	assert.NotEmpty(t, m.KernelVersion)
	assert.NotEmpty(t, m.BootID)
	_, err = ReadMachineInfo("/no/such/dir")
	assert.Error(t, err)

	noFs, err := ReadMachineInfo("")
	require.NoError(t, err)
	assert.Zero(t, noFs.EphemeralStorageCapacity, "no root directory: no filesystem measured")
	assert.Equal(t, m.MemoryCapacity, noFs.MemoryCapacity)
}

func TestCapacityFromMachineInfo(t *testing.T) {
	c := CapacityFromMachineInfo(&MachineInfo{NumCores: 2, MemoryCapacity: 4 << 30, EphemeralStorageCapacity: 10 << 30})
	assert.Len(t, c, 2, "cpu and memory only")
	assert.Equal(t, "2", c.Cpu().String())
	assert.Equal(t, "4Gi", c.Memory().String())
}
