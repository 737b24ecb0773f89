package images

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// errPullQPSExceeded is upstream's throttled pull error: the registry pull
// rate (registryPullQPS, registryBurst) is used up. The pull fails like
// any other, and the back-off applies.
var errPullQPSExceeded = errors.New("pull QPS exceeded")

// throttledImageService refuses pulls past the rate, without waiting
// (upstream's throttledImageService).
type throttledImageService struct {
	ImageService
	limiter flowcontrol.RateLimiter
}

// throttleImagePulling wraps service with a token bucket of qps pulls a
// second and burst at once; a qps of 0 throttles nothing.
func throttleImagePulling(service ImageService, qps float32, burst int, clk clock.Clock) ImageService {
	if qps == 0 {
		return service
	}
	return &throttledImageService{ImageService: service, limiter: flowcontrol.NewTokenBucketRateLimiterWithClock(qps, burst, clk)}
}

func (s *throttledImageService) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, pullSecrets []v1.Secret, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if !s.limiter.TryAccept() {
		return "", errPullQPSExceeded
	}
	return s.ImageService.PullImage(ctx, image, pullSecrets, podSandboxConfig)
}

// pullResult is one pull's outcome.
type pullResult struct {
	imageRef string
	err      error
	// pullDuration is the pull itself, without the wait for a turn.
	pullDuration time.Duration
}

// imagePuller pulls images, as many at once as it allows
// (upstream's serialImagePuller and parallelImagePuller).
type imagePuller interface {
	pullImage(ctx context.Context, spec *runtimeapi.ImageSpec, pullSecrets []v1.Secret, podSandboxConfig *runtimeapi.PodSandboxConfig) pullResult
}

// limitedPuller lets at most cap(tokens) pulls run at once; nil tokens:
// no limit. The caller's goroutine waits for its turn, or for ctx.
type limitedPuller struct {
	service ImageService
	clock   clock.Clock
	tokens  chan struct{}
}

// newSerialImagePuller pulls one image at a time (serializeImagePulls, the
// default).
func newSerialImagePuller(service ImageService, clk clock.Clock) imagePuller {
	return &limitedPuller{service: service, clock: clk, tokens: make(chan struct{}, 1)}
}

// newParallelImagePuller pulls at most maxParallelImagePulls images at
// once; nil or less than 1: no limit.
func newParallelImagePuller(service ImageService, maxParallelImagePulls *int32, clk clock.Clock) imagePuller {
	p := &limitedPuller{service: service, clock: clk}
	if maxParallelImagePulls != nil && *maxParallelImagePulls >= 1 {
		p.tokens = make(chan struct{}, *maxParallelImagePulls)
	}
	return p
}

func (p *limitedPuller) pullImage(ctx context.Context, spec *runtimeapi.ImageSpec, pullSecrets []v1.Secret, podSandboxConfig *runtimeapi.PodSandboxConfig) pullResult {
	if p.tokens != nil {
		select {
		case p.tokens <- struct{}{}:
			defer func() { <-p.tokens }()
		case <-ctx.Done():
			return pullResult{err: ctx.Err()}
		}
	}
	start := p.clock.Now()
	ref, err := p.service.PullImage(ctx, spec, pullSecrets, podSandboxConfig)
	return pullResult{imageRef: ref, err: err, pullDuration: p.clock.Since(start)}
}
