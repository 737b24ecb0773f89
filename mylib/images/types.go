package images

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
)

// ImageGCPeriod is how often the kubelet collects unused images
// (upstream's ImageGCPeriod).
const ImageGCPeriod = 5 * time.Minute

// ImageGCPolicy is upstream's: collect when the image filesystem is more
// than HighThresholdPercent full, down to LowThresholdPercent; never an
// image unused for less than MinAge; always one unused for more than
// MaxAge (0: never by age).
type ImageGCPolicy struct {
	HighThresholdPercent int
	LowThresholdPercent  int
	MinAge, MaxAge       time.Duration
}

// StatsProvider gives the image filesystem's figures (stats.Provider's
// ImageFsStats).
type StatsProvider interface {
	ImageFsStats(ctx context.Context) (imageFs, containerFs *statsapi.FsStats, err error)
}

// ImageGCManager is upstream's: it knows which images are in use and when
// each was last used, and deletes the others by policy.
type ImageGCManager interface {
	// GarbageCollect frees space by policy (the kubelet calls it every
	// ImageGCPeriod); beganGC is when this collection began.
	GarbageCollect(ctx context.Context, beganGC time.Time) error
	// DeleteUnusedImages deletes every unused image old enough (the
	// eviction manager's reclaim).
	DeleteUnusedImages(ctx context.Context) error
	// Run keeps the list of images and their last use up to date until
	// ctx ends.
	Run(ctx context.Context)
}

// NewImageGCManager returns the image GC manager. SEAM: the images helper
// writes it.
func NewImageGCManager(images runtimeapi.ImageServiceClient, runtime kubecontainer.Runtime, statsProvider StatsProvider,
	recorder record.EventRecorder, nodeRef *v1.ObjectReference, policy ImageGCPolicy, clk clock.Clock) (ImageGCManager, error) {
	return nil, errors.New("images: not written yet")
}

// PullConfig is how images are pulled (the KubeletConfiguration's
// serializeImagePulls, maxParallelImagePulls, registryPullQPS and
// registryBurst).
type PullConfig struct {
	SerializeImagePulls   bool
	MaxParallelImagePulls *int32
	RegistryPullQPS       float32
	RegistryBurst         int
}

// DefaultPullConfig is upstream's default: one pull at a time, 5 pulls a
// second with bursts of 10.
func DefaultPullConfig() PullConfig {
	return PullConfig{SerializeImagePulls: true, RegistryPullQPS: 5, RegistryBurst: 10}
}
