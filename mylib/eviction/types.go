package eviction

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Signal is an eviction signal (upstream's evictionapi.Signal).
type Signal string

// The signals this kubelet watches, upstream's names.
const (
	SignalMemoryAvailable   Signal = "memory.available"
	SignalNodeFsAvailable   Signal = "nodefs.available"
	SignalNodeFsInodesFree  Signal = "nodefs.inodesFree"
	SignalImageFsAvailable  Signal = "imagefs.available"
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	SignalPIDAvailable      Signal = "pid.available"
)

// ThresholdOperator compares a signal with a threshold's value.
type ThresholdOperator string

// OpLessThan: the threshold is met when the signal is below the value.
const OpLessThan ThresholdOperator = "LessThan"

// ThresholdValue is a quantity, or a percentage (0..1) of the capacity.
type ThresholdValue struct {
	Quantity   *resource.Quantity
	Percentage float32
}

// Threshold is one eviction threshold (upstream's evictionapi.Threshold):
// hard when GracePeriod is zero, soft otherwise.
type Threshold struct {
	Signal      Signal
	Operator    ThresholdOperator
	Value       ThresholdValue
	GracePeriod time.Duration
	// MinReclaim is how much past the threshold to reclaim; nil: nothing.
	MinReclaim *ThresholdValue
}

// Config is the eviction manager's configuration (upstream's
// eviction.Config), read from the KubeletConfiguration.
type Config struct {
	// PressureTransitionPeriod: how long a pressure condition stays after
	// its threshold is no longer met (evictionPressureTransitionPeriod).
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds is the grace period of a pod evicted on a
	// soft threshold (evictionMaxPodGracePeriod).
	MaxPodGracePeriodSeconds int64
	// Thresholds: hard and soft (ParseThresholdConfig).
	Thresholds []Threshold
}

// SummaryProvider is the summary the manager reads at each pass
// (stats.Provider's Get, with updateStats true).
type SummaryProvider interface {
	Get(ctx context.Context, updateStats bool) (*statsapi.Summary, error)
}

// KillPodFunc kills a pod: its worker terminates it within
// gracePeriodOverride (nil: its own), and statusFn sets the status it ends
// with (phase Failed, reason Evicted…). It returns once the pod is killed
// or an error (upstream's KillPodFunc).
type KillPodFunc func(pod *v1.Pod, isEvicted bool, gracePeriodOverride *int64, statusFn func(*v1.PodStatus)) error

// ImageGC deletes the images no container uses (upstream's ImageGC).
type ImageGC interface {
	DeleteUnusedImages(ctx context.Context) error
}

// ContainerGC deletes every dead container it may (upstream's ContainerGC).
type ContainerGC interface {
	DeleteAllUnusedContainers(ctx context.Context) error
}

// ActivePodsFunc lists the pods that may be evicted: those admitted and not
// yet terminated.
type ActivePodsFunc func() []*v1.Pod

// PodCleanedUpFunc reports whether an evicted pod's resources are released.
type PodCleanedUpFunc func(*v1.Pod) bool

// Manager is the eviction manager (upstream's eviction.Manager). Run is
// upstream's Start, blocking until ctx ends.
type Manager interface {
	Run(ctx context.Context, podFunc ActivePodsFunc, podCleanedUpFunc PodCleanedUpFunc, monitoringInterval time.Duration)
	IsUnderMemoryPressure() bool
	IsUnderDiskPressure() bool
	IsUnderPIDPressure() bool
}
