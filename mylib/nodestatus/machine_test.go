package nodestatus

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadMachineOf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ReadMachine reads /proc")
	}
	dir := t.TempDir()
	host, err := ReadMachine(dir)
	require.NoError(t, err)

	same, err := ReadMachineOf(dir, MockMachine{})
	require.NoError(t, err)
	assert.Equal(t, host.MemoryCapacity, same.MemoryCapacity, "a zero mock is the host")
	assert.Equal(t, host.EphemeralStorageCapacity, same.EphemeralStorageCapacity)

	memOnly, err := ReadMachineOf(dir, MockMachine{MemoryCapacity: 1 << 30, ImageFsCapacity: 1 << 20})
	require.NoError(t, err)
	assert.Equal(t, int64(1<<30), memOnly.MemoryCapacity)
	assert.Equal(t, host.EphemeralStorageCapacity, memOnly.EphemeralStorageCapacity, "an unset field keeps the host's figure")
	assert.Equal(t, host.NumCores, memOnly.NumCores)
	assert.Equal(t, host.BootID, memOnly.BootID)

	both, err := ReadMachineOf(dir, MockMachine{MemoryCapacity: 2 << 30, NodeFsCapacity: 5 << 30})
	require.NoError(t, err)
	assert.Equal(t, int64(2<<30), both.MemoryCapacity)
	assert.Equal(t, int64(5<<30), both.EphemeralStorageCapacity)

	_, err = ReadMachineOf("/no/such/dir", MockMachine{MemoryCapacity: 1 << 30})
	assert.Error(t, err, "the host is still read")
}

func TestMockMachineIsZero(t *testing.T) {
	assert.True(t, MockMachine{}.IsZero())
	assert.False(t, MockMachine{ImageFsCapacity: 1}.IsZero())
}
