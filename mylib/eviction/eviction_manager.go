package eviction

import (
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"mykubelet/mylib/lifecycle"
)

// MonitoringInterval is how often the manager looks at the node
// (upstream's evictionMonitoringPeriod).
const MonitoringInterval = 10 * time.Second

// NewManager returns the manager and its admission handler (upstream's
// NewManager). SEAM: the eviction helper writes it.
func NewManager(summaryProvider SummaryProvider, config Config, killPodFunc KillPodFunc, imageGC ImageGC, containerGC ContainerGC,
	recorder record.EventRecorder, nodeRef *v1.ObjectReference, clk clock.WithTicker) (Manager, lifecycle.PodAdmitHandler, error) {
	return nil, nil, errors.New("eviction: not written yet")
}

// ParseThresholdConfig reads the KubeletConfiguration's evictionHard,
// evictionSoft, evictionSoftGracePeriod and evictionMinimumReclaim
// (upstream's eviction.ParseThresholdConfig, without allocatable
// enforcement). SEAM: the eviction helper writes it.
func ParseThresholdConfig(evictionHard, evictionSoft, evictionSoftGracePeriod, evictionMinimumReclaim map[string]string) ([]Threshold, error) {
	return nil, errors.New("eviction: not written yet")
}
