package app

import (
	"time"

	"mykubelet/mylib/cm"
	"mykubelet/mylib/kubelet"
	"mykubelet/mylib/kubeletconfig"
)

// containerManagerDependency gives deps the container manager (upstream's
// run: cm.NewContainerManager into kubeDeps.ContainerManager) when the
// kubelet runs containers and deps has none: the node's and the pods'
// cgroups by the KubeletConfiguration's cgroupsPerQOS, cgroupRoot,
// cgroupDriver, enforceNodeAllocatable, podPidsLimit and cpuCFSQuota,
// with upstream's defaults for those unset. Where the kubelet may not
// make cgroups (not root, no writable cgroup filesystem) it is the stub
// and one log line says so (cm.NewForNode); the kubelet runs without pod
// cgroups as before. A cgroupDriver other than cgroupfs, or a cgroupRoot
// that does not exist, is an error.
func containerManagerDependency(s *KubeletServer, deps *kubelet.Dependencies) error {
	if deps.ContainerManager != nil || !s.RunContainers {
		return nil
	}
	m, err := cm.NewForNode(nodeConfig(s))
	if err != nil {
		return err
	}
	deps.ContainerManager = m
	return nil
}

// nodeConfig is the container manager's part of s's configuration.
func nodeConfig(s *KubeletServer) cm.NodeConfig {
	kc := s.KubeletConfiguration
	nc := cm.NodeConfig{
		CgroupsPerQOS:          kc.CgroupsPerQOS == nil || *kc.CgroupsPerQOS,
		CgroupRoot:             kc.CgroupRoot,
		CgroupDriver:           kc.CgroupDriver,
		EnforceNodeAllocatable: kc.EnforceNodeAllocatable,
		EnforceCPULimits:       kc.CPUCFSQuota == nil || *kc.CPUCFSQuota,
	}
	if nc.EnforceNodeAllocatable == nil {
		nc.EnforceNodeAllocatable = kubeletconfig.DefaultNodeAllocatableEnforcement()
	}
	if kc.PodPidsLimit != nil {
		nc.PodPidsLimit = *kc.PodPidsLimit
	}
	if kc.CPUCFSQuotaPeriod != nil {
		nc.CPUCFSQuotaPeriod = kc.CPUCFSQuotaPeriod.Duration
	}
	if nc.CPUCFSQuotaPeriod == 0 {
		nc.CPUCFSQuotaPeriod = cm.QuotaPeriod * time.Microsecond
	}
	return nc
}
