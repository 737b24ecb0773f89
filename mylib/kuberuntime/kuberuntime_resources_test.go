package kuberuntime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestGenerateLinuxContainerResources(t *testing.T) {
	c := &v1.Container{Resources: v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi"), v1.ResourceCPU: resource.MustParse("500m")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
	}}
	res := generateLinuxContainerResources(c)
	assert.Equal(t, int64(100<<20), res.MemoryLimitInBytes)
	assert.Equal(t, int64(256), res.CpuShares)
	assert.Equal(t, int64(100000), res.CpuPeriod)
	assert.Equal(t, int64(50000), res.CpuQuota)

	res = generateLinuxContainerResources(&v1.Container{})
	assert.Zero(t, res.MemoryLimitInBytes, "no limit: the runtime's own")
	assert.Equal(t, int64(2), res.CpuShares)
	assert.Zero(t, res.CpuQuota)
}
