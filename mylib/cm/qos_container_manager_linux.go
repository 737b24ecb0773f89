package cm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"mykubelet/mylib/lifecycle"
	"mykubelet/mylib/qos"
)

// periodicQOSCgroupUpdateInterval is how often the QoS cgroups follow the
// pods (upstream's).
const periodicQOSCgroupUpdateInterval = time.Minute

// qosContainerManager makes the Burstable and BestEffort cgroups under
// the node allocatable cgroup and keeps their CPU weights (upstream's
// qosContainerManagerImpl, without QOSReserved's memory limits, hugepages
// and MemoryQoS).
type qosContainerManager struct {
	mu                sync.Mutex
	qosContainersInfo QOSContainersInfo
	cgroupManager     CgroupManager
	activePods        ActivePodsFunc
	cgroupRoot        CgroupName
}

// QOSCgroupNames are the QoS classes' cgroups under root (kubepods):
// Guaranteed pods in root itself.
func QOSCgroupNames(root CgroupName) QOSContainersInfo {
	return QOSContainersInfo{
		Guaranteed: root,
		Burstable:  NewCgroupName(root, strings.ToLower(string(v1.PodQOSBurstable))),
		BestEffort: NewCgroupName(root, strings.ToLower(string(v1.PodQOSBestEffort))),
	}
}

// Start makes (or updates) the QoS cgroups, BestEffort with MinShares,
// then keeps them up to date every minute until ctx ends.
func (m *qosContainerManager) Start(ctx context.Context, activePods ActivePodsFunc) error {
	if err := m.cgroupManager.Validate(m.cgroupRoot); err != nil {
		return fmt.Errorf("error validating root container %v : %w", m.cgroupRoot.ToCgroupfs(), err)
	}
	info := QOSCgroupNames(m.cgroupRoot)
	for class, name := range map[v1.PodQOSClass]CgroupName{v1.PodQOSBurstable: info.Burstable, v1.PodQOSBestEffort: info.BestEffort} {
		params := &ResourceConfig{}
		if class == v1.PodQOSBestEffort {
			minShares := uint64(MinShares)
			params.CPUShares = &minShares
		}
		cfg := &CgroupConfig{Name: name, ResourceParameters: params}
		if !m.cgroupManager.Exists(name) {
			if err := m.cgroupManager.Create(cfg); err != nil {
				return fmt.Errorf("failed to create top level %v QOS cgroup : %w", class, err)
			}
		} else if err := m.cgroupManager.Update(cfg); err != nil {
			return fmt.Errorf("failed to update top level %v QOS cgroup : %w", class, err)
		}
	}
	m.mu.Lock()
	m.qosContainersInfo, m.activePods = info, activePods
	m.mu.Unlock()
	go func() {
		t := time.NewTicker(periodicQOSCgroupUpdateInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := m.UpdateCgroups(); err != nil {
					klog.InfoS("Failed to reserve QoS requests", "err", err)
				}
			}
		}
	}()
	return nil
}

func (m *qosContainerManager) GetQOSContainersInfo() QOSContainersInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.qosContainersInfo
}

// qosCPUShares are the QoS cgroups' cpu.shares for the active pods:
// Burstable the sum of its pods' CPU requests, BestEffort the least.
func qosCPUShares(pods []*v1.Pod) (burstable, bestEffort uint64) {
	var milli int64
	for _, pod := range pods {
		if qos.GetPodQOS(pod) == v1.PodQOSBurstable {
			reqs := lifecycle.PodRequests(pod)
			milli += reqs.Cpu().MilliValue()
		}
	}
	return MilliCPUToShares(milli), MinShares
}

// UpdateCgroups sets the QoS cgroups' CPU weights from the active pods
// (upstream's setCPUCgroupConfig; its memory reservations need the
// QOSReserved feature gate, off by default, and are left out).
func (m *qosContainerManager) UpdateCgroups() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.activePods == nil {
		return nil // not started
	}
	burstable, bestEffort := qosCPUShares(m.activePods())
	for _, cfg := range []*CgroupConfig{
		{Name: m.qosContainersInfo.Burstable, ResourceParameters: &ResourceConfig{CPUShares: &burstable}},
		{Name: m.qosContainersInfo.BestEffort, ResourceParameters: &ResourceConfig{CPUShares: &bestEffort}},
	} {
		if err := m.cgroupManager.Update(cfg); err != nil {
			return err
		}
	}
	return nil
}
