package kubeletconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Upstream's defaults for the container manager's fields.
func TestCgroupDefaults(t *testing.T) {
	f, err := parse(t)
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.True(t, *kc.CgroupsPerQOS)
	assert.Equal(t, "cgroupfs", kc.CgroupDriver)
	assert.Equal(t, "", kc.CgroupRoot, "the root")
	assert.Equal(t, []string{"pods"}, kc.EnforceNodeAllocatable)
}

func TestCgroupFields(t *testing.T) {
	f, err := parse(t, "--config", writeConfig(t, header+"cgroupsPerQOS: true\ncgroupRoot: /mykubelet\ncgroupDriver: cgroupfs\nenforceNodeAllocatable: [none]\n"))
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, "/mykubelet", kc.CgroupRoot)
	assert.Equal(t, []string{"none"}, kc.EnforceNodeAllocatable)

	for body, want := range map[string]string{
		"cgroupDriver: systemd\n":                                `cgroupDriver "systemd" is not supported by this kubelet: only "cgroupfs"`,
		"enforceNodeAllocatable: [pods, system-reserved]\n":      `enforceNodeAllocatable "system-reserved" is not supported by this kubelet: only "pods" or "none"`,
		"enforceNodeAllocatable: [none, pods]\n":                 `enforceNodeAllocatable: "none" cannot be combined with other values`,
		"cgroupsPerQOS: false\n":                                 "enforceNodeAllocatable pods is not supported unless cgroupsPerQOS is turned on",
		"cgroupsPerQOS: false\nenforceNodeAllocatable: [none]\n": "",
	} {
		f, err := parse(t, "--config", writeConfig(t, header+body))
		require.NoError(t, err)
		_, err = f.KubeletConfiguration()
		if want == "" {
			assert.NoError(t, err, body)
			continue
		}
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), want, body)
	}
}
