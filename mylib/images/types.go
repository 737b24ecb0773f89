package images

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// ImageGCPeriod is how often the kubelet collects unused images
// (upstream's ImageGCPeriod).
const ImageGCPeriod = 5 * time.Minute

// DetectImagesPeriod is how often Run lists the images and notes which
// ones containers use, and ImageListCachePeriod how often it refreshes the
// list GetImageList returns (upstream's Start: 5 min and 30 s, written
// inline there).
const (
	DetectImagesPeriod   = 5 * time.Minute
	ImageListCachePeriod = 30 * time.Second
)

// The image pull back-off (upstream NewMainKubelet's imageBackOff:
// backOffPeriod, then MaxContainerBackOff): 10 s after a failed pull,
// doubling to 300 s, per pod UID and image.
const (
	InitialImagePullBackOff = 10 * time.Second
	MaxImagePullBackOff     = 300 * time.Second
)

// The image errors; their text is the waiting reason a container's status
// shows (upstream pkg/kubelet/images/types.go).
var (
	ErrImagePullBackOff = errors.New("ImagePullBackOff")
	ErrImageInspect     = errors.New("ImageInspectError")
	ErrImagePull        = errors.New("ErrImagePull")
	ErrImageNeverPull   = errors.New("ErrImageNeverPull")
	ErrInvalidImageName = errors.New("InvalidImageName")
)

// Event reasons of this package, upstream's pkg/kubelet/events names
// (mylib/events has the reasons the rest of the kubelet records).
const (
	// BackOffPullImage: a pull of this pod's image failed lately; the
	// kubelet waits before it tries again.
	BackOffPullImage = "BackOff"
	// FreeDiskSpaceFailed: image GC could not free enough to reach the
	// low threshold.
	FreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	// InvalidDiskCapacity: the image filesystem reported no capacity.
	InvalidDiskCapacity = "InvalidDiskCapacity"
	// ImageGCFailed: a collection failed again (the kubelet's loop
	// records it, upstream StartGarbageCollection).
	ImageGCFailed = "ImageGCFailed"
)

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

// Image is an image on the node as the runtime lists it (upstream's
// kubecontainer.Image, which mylib/container does not have).
type Image struct {
	// ID is the runtime's image ID (a containers' ImageID names it).
	ID          string
	RepoTags    []string
	RepoDigests []string
	// Size in bytes.
	Size int64
	// Pinned images are never collected (the runtime pins e.g. pause).
	Pinned bool
}

// ImageGCManager is upstream's: it knows which images are in use and when
// each was last used, and deletes the others by policy.
type ImageGCManager interface {
	// GarbageCollect frees space by policy (the kubelet calls it every
	// ImageGCPeriod); beganGC is when the kubelet began collecting
	// (MaxAge counts only after it).
	GarbageCollect(ctx context.Context, beganGC time.Time) error
	// DeleteUnusedImages deletes every unused image old enough (the
	// eviction manager's reclaim).
	DeleteUnusedImages(ctx context.Context) error
	// Run keeps the list of images and their last use up to date until
	// ctx ends (upstream's Start).
	Run(ctx context.Context)
	// GetImageList is the node's images as last listed (every
	// ImageListCachePeriod by Run), largest first: the node status's
	// images.
	GetImageList() ([]Image, error)
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

// Validate checks the configuration as upstream's kubelet config
// validation does for these four fields.
func (c PullConfig) Validate() error {
	var errs []error
	if c.MaxParallelImagePulls != nil && *c.MaxParallelImagePulls < 1 {
		errs = append(errs, fmt.Errorf("invalid configuration: maxParallelImagePulls %d must be a positive number", *c.MaxParallelImagePulls))
	}
	if c.SerializeImagePulls && c.MaxParallelImagePulls != nil && *c.MaxParallelImagePulls > 1 {
		errs = append(errs, fmt.Errorf("invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false"))
	}
	if c.RegistryPullQPS < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: registryPullQPS (--registry-qps) %v must not be a negative number", c.RegistryPullQPS))
	}
	if c.RegistryBurst < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: registryBurst (--registry-burst) %d must not be a negative number", c.RegistryBurst))
	}
	return errors.Join(errs...)
}

// ImageService is what the image manager needs of the runtime (upstream's
// kubecontainer.ImageService, two of its methods; kuberuntime.Manager has
// them).
type ImageService interface {
	// PullImage pulls the image with the pull secrets' credentials for its
	// registry, then none, and returns its reference.
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, pullSecrets []v1.Secret, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// GetImageRef returns the image's ID, or "" when it is not present.
	GetImageRef(ctx context.Context, image *runtimeapi.ImageSpec) (string, error)
}

// ImageManager makes sure a container's image is there before the
// container is created (upstream's ImageManager).
type ImageManager interface {
	// EnsureImageExists pulls imgRef for pod if pullPolicy asks for it,
	// and returns the image's reference, or a message and one of the Err
	// values. Events go to objRef.
	EnsureImageExists(ctx context.Context, objRef *v1.ObjectReference, pod *v1.Pod, imgRef string, pullSecrets []v1.Secret,
		podSandboxConfig *runtimeapi.PodSandboxConfig, pullPolicy v1.PullPolicy) (imageRef, message string, err error)
}
