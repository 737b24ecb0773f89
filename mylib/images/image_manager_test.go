package images

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakePullService is an ImageService whose pulls can fail, block until
// released, and are counted, at once too.
type fakePullService struct {
	mu       sync.Mutex
	present  map[string]bool
	pulls    []string
	running  int
	maxAtOnc int
	fail     error
	// gate, if set, holds every pull until the test sends on it; started
	// receives the image of each pull that began.
	gate    chan struct{}
	started chan string
}

func newFakePullService() *fakePullService {
	return &fakePullService{present: map[string]bool{}}
}

func (f *fakePullService) PullImage(_ context.Context, image *runtimeapi.ImageSpec, _ []v1.Secret, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	f.pulls = append(f.pulls, image.Image)
	f.running++
	f.maxAtOnc = max(f.maxAtOnc, f.running)
	gate, started, fail := f.gate, f.started, f.fail
	f.mu.Unlock()
	if started != nil {
		started <- image.Image
	}
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running--
	if fail != nil {
		return "", fail
	}
	f.present[image.Image] = true
	return "sha256:" + image.Image, nil
}

func (f *fakePullService) GetImageRef(_ context.Context, image *runtimeapi.ImageSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.present[image.Image] {
		return "sha256:" + image.Image, nil
	}
	return "", nil
}

func (f *fakePullService) pullCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pulls)
}

func testPod(uid string) (*v1.Pod, *v1.ObjectReference) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + uid, Namespace: "default", UID: types.UID(uid)}}
	return pod, &v1.ObjectReference{Kind: "Pod", Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, FieldPath: "spec.containers{app}"}
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestPullBackOffFrom10sDoublingTo300sPerPodAndImage(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	svc := newFakePullService()
	svc.fail = errors.New("rpc error: code = NotFound desc = no such image")
	rec := record.NewFakeRecorder(100)
	m := NewImageManager(rec, svc, NewImageBackOff(clk), PullConfig{SerializeImagePulls: true})
	pod, ref := testPod("a")

	_, msg, err := m.EnsureImageExists(ctx, ref, pod, "nginx:1.27", nil, nil, v1.PullIfNotPresent)
	require.ErrorIs(t, err, ErrImagePull)
	assert.Equal(t, "rpc error: code = NotFound desc = no such image", msg)
	assert.Equal(t, []string{
		`Normal Pulling Pulling image "nginx:1.27"`,
		`Warning Failed Failed to pull image "nginx:1.27": rpc error: code = NotFound desc = no such image`,
	}, drain(rec))

	// Each wait, then the pull is tried again and fails again.
	for _, wait := range []time.Duration{10, 20, 40, 80, 160, 300, 300} {
		wait *= time.Second
		pulls := svc.pullCount()
		clk.Step(wait - time.Second)
		_, msg, err := m.EnsureImageExists(ctx, ref, pod, "nginx:1.27", nil, nil, v1.PullIfNotPresent)
		require.ErrorIs(t, err, ErrImagePullBackOff, "%v after the failure", wait-time.Second)
		assert.Equal(t, `Back-off pulling image "nginx:1.27": ErrImagePull: rpc error: code = NotFound desc = no such image`, msg,
			"the waiting message says why (upstream's prevPullErrMsg)")
		assert.Equal(t, []string{`Normal BackOff Back-off pulling image "nginx:1.27"`}, drain(rec))
		assert.Equal(t, pulls, svc.pullCount(), "no pull while backing off")

		// Another pod's pull of the same image is not held back.
		other, otherRef := testPod(fmt.Sprintf("other-%d", wait))
		_, _, err = m.EnsureImageExists(ctx, otherRef, other, "nginx:1.27", nil, nil, v1.PullIfNotPresent)
		require.ErrorIs(t, err, ErrImagePull)
		drain(rec)

		clk.Step(time.Second)
		_, _, err = m.EnsureImageExists(ctx, ref, pod, "nginx:1.27", nil, nil, v1.PullIfNotPresent)
		require.ErrorIs(t, err, ErrImagePull, "the back-off of %v is over", wait)
		assert.Equal(t, pulls+2, svc.pullCount())
		drain(rec)
	}

	// Once the registry answers, the next try after the back-off pulls.
	svc.mu.Lock()
	svc.fail = nil
	svc.mu.Unlock()
	clk.Step(300 * time.Second)
	imageRef, _, err := m.EnsureImageExists(ctx, ref, pod, "nginx:1.27", nil, nil, v1.PullIfNotPresent)
	require.NoError(t, err)
	assert.Equal(t, "sha256:nginx:1.27", imageRef)
	assert.Equal(t, []string{`Normal Pulling Pulling image "nginx:1.27"`, `Normal Pulled Successfully pulled image "nginx:1.27" in 0s`}, drain(rec))
}

func TestEnsureImageExistsByPullPolicy(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	svc := newFakePullService()
	svc.present["busybox:1.37"] = true
	rec := record.NewFakeRecorder(100)
	m := NewImageManager(rec, svc, NewImageBackOff(clk), DefaultPullConfig())
	pod, ref := testPod("a")

	imageRef, _, err := m.EnsureImageExists(ctx, ref, pod, "busybox:1.37", nil, nil, v1.PullIfNotPresent)
	require.NoError(t, err)
	assert.Equal(t, "sha256:busybox:1.37", imageRef)
	assert.Equal(t, []string{`Normal Pulled Container image "busybox:1.37" already present on machine`}, drain(rec))

	_, msg, err := m.EnsureImageExists(ctx, ref, pod, "app", nil, nil, v1.PullNever)
	require.ErrorIs(t, err, ErrImageNeverPull)
	assert.Equal(t, `Container image "app" is not present with pull policy of Never`, msg, "named as the spec names it")
	assert.Equal(t, []string{`Warning ErrImageNeverPull Container image "app" is not present with pull policy of Never`}, drain(rec))
	assert.Empty(t, svc.pulls, "Never never pulls")

	_, _, err = m.EnsureImageExists(ctx, ref, pod, "bad image", nil, nil, v1.PullAlways)
	require.ErrorIs(t, err, ErrInvalidImageName)

	_, _, err = m.EnsureImageExists(ctx, ref, pod, "busybox:1.37", nil, nil, v1.PullAlways)
	require.NoError(t, err)
	assert.Equal(t, []string{"busybox:1.37"}, svc.pulls, "Always pulls what is present")
	drain(rec)

	// IfNotPresent pulls what is missing; the events name the image as
	// the spec does (no ":latest" added).
	_, _, err = m.EnsureImageExists(ctx, ref, pod, "nginx", nil, nil, v1.PullIfNotPresent)
	require.NoError(t, err)
	assert.Equal(t, []string{"busybox:1.37", "nginx:latest"}, svc.pulls, "the runtime is asked for the defaulted tag")
	assert.Equal(t, []string{`Normal Pulling Pulling image "nginx"`, `Normal Pulled Successfully pulled image "nginx" in 0s`}, drain(rec))
}

// inspectFails is an image service that cannot say what it has.
type inspectFails struct{ *fakePullService }

func (inspectFails) GetImageRef(context.Context, *runtimeapi.ImageSpec) (string, error) {
	return "", errors.New("inspect broken")
}

// TestAlwaysDoesNotAskWhatIsPresent: with Always the image is pulled
// without asking the runtime first (upstream's imagePullPrecheck); the
// others ask, and fail with ErrImageInspect when the runtime cannot say.
func TestAlwaysDoesNotAskWhatIsPresent(t *testing.T) {
	ctx := context.Background()
	svc := inspectFails{newFakePullService()}
	m := NewImageManager(record.NewFakeRecorder(10), svc, NewImageBackOff(clocktesting.NewFakeClock(t0)), DefaultPullConfig())
	pod, ref := testPod("a")
	_, _, err := m.EnsureImageExists(ctx, ref, pod, "busybox:1.37", nil, nil, v1.PullAlways)
	require.NoError(t, err)
	for _, policy := range []v1.PullPolicy{v1.PullIfNotPresent, v1.PullNever} {
		_, msg, err := m.EnsureImageExists(ctx, ref, pod, "busybox:1.37", nil, nil, policy)
		require.ErrorIs(t, err, ErrImageInspect, policy)
		assert.Equal(t, `Failed to inspect image "busybox:1.37": inspect broken`, msg)
	}
}

func TestEvalCRIPullErrKnowsTheRegistryErrors(t *testing.T) {
	msg, err := evalCRIPullErr("app:v1", errors.New("RegistryUnavailable: connection refused"))
	assert.ErrorIs(t, err, crierrors.ErrRegistryUnavailable)
	assert.Equal(t, "image pull failed for app:v1 because the registry is unavailable: connection refused", msg)
	msg, err = evalCRIPullErr("app:v1", errors.New("SignatureValidationFailed"))
	assert.ErrorIs(t, err, crierrors.ErrSignatureValidationFailed)
	assert.Equal(t, "image pull failed for app:v1 because the signature validation failed", msg)
	msg, err = evalCRIPullErr("app:v1", errors.New("boom"))
	assert.ErrorIs(t, err, ErrImagePull)
	assert.Equal(t, "boom", msg)
}

func TestApplyDefaultImageTag(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                           "busybox:latest",
		"busybox:1.37":                      "busybox:1.37",
		"localhost:5000/app":                "localhost:5000/app:latest",
		"localhost:5000/app:v1":             "localhost:5000/app:v1",
		"registry.k8s.io/pause@sha256:0123": "registry.k8s.io/pause@sha256:0123",
	} {
		got, err := applyDefaultImageTag(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "bad image", "registry/"} {
		_, err := applyDefaultImageTag(bad)
		assert.Error(t, err, bad)
	}
}

// pullConcurrently starts EnsureImageExists of n images at once and
// returns a channel of their errors.
func pullConcurrently(m ImageManager, n int) <-chan error {
	errs := make(chan error, n)
	for i := range n {
		go func() {
			pod, ref := testPod(fmt.Sprint(i))
			_, _, err := m.EnsureImageExists(context.Background(), ref, pod, fmt.Sprintf("img%d:v1", i), nil, nil, v1.PullIfNotPresent)
			errs <- err
		}()
	}
	return errs
}

func waitStarted(t *testing.T, started <-chan string) string {
	t.Helper()
	select {
	case img := <-started:
		return img
	case <-time.After(10 * time.Second):
		t.Fatal("no pull started")
		return ""
	}
}

func TestSerialPullerPullsOneImageAtATime(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	svc := newFakePullService()
	svc.gate, svc.started = make(chan struct{}), make(chan string, 3)
	rec := record.NewFakeRecorder(100)
	m := NewImageManager(rec, svc, NewImageBackOff(clk), DefaultPullConfig())

	errs := pullConcurrently(m, 3)
	for range 3 {
		waitStarted(t, svc.started)
		svc.mu.Lock()
		assert.Equal(t, 1, svc.running, "one pull runs")
		svc.mu.Unlock()
		svc.gate <- struct{}{}
	}
	for range 3 {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, 1, svc.maxAtOnc)
	assert.Len(t, svc.pulls, 3)
}

func TestParallelPullerPullsUpToMaxParallelImagePulls(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	svc := newFakePullService()
	svc.gate, svc.started = make(chan struct{}), make(chan string, 3)
	m := NewImageManager(record.NewFakeRecorder(100), svc, NewImageBackOff(clk),
		PullConfig{SerializeImagePulls: false, MaxParallelImagePulls: ptr.To[int32](2)})

	errs := pullConcurrently(m, 3)
	// Two pulls run together; the third waits for one of them.
	waitStarted(t, svc.started)
	waitStarted(t, svc.started)
	svc.mu.Lock()
	assert.Equal(t, 2, svc.running)
	svc.mu.Unlock()
	svc.gate <- struct{}{}
	waitStarted(t, svc.started)
	svc.gate <- struct{}{}
	svc.gate <- struct{}{}
	for range 3 {
		require.NoError(t, <-errs)
	}
	assert.Equal(t, 2, svc.maxAtOnc)
}

func TestParallelPullerWithoutMaximumPullsAllAtOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	svc := newFakePullService()
	svc.gate, svc.started = make(chan struct{}), make(chan string, 3)
	m := NewImageManager(record.NewFakeRecorder(100), svc, NewImageBackOff(clk), PullConfig{})

	errs := pullConcurrently(m, 3)
	for range 3 {
		waitStarted(t, svc.started)
	}
	assert.Equal(t, 3, svc.maxAtOnc)
	for range 3 {
		svc.gate <- struct{}{}
	}
	for range 3 {
		require.NoError(t, <-errs)
	}
}

func TestSerialPullerWaitGivesUpWithTheContext(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	svc := newFakePullService()
	svc.gate, svc.started = make(chan struct{}), make(chan string, 1)
	p := newSerialImagePuller(svc, clk)
	done := make(chan pullResult)
	go func() { done <- p.pullImage(context.Background(), &runtimeapi.ImageSpec{Image: "a:1"}, nil, nil) }()
	waitStarted(t, svc.started)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := p.pullImage(ctx, &runtimeapi.ImageSpec{Image: "b:1"}, nil, nil)
	assert.ErrorIs(t, r.err, context.Canceled)
	svc.gate <- struct{}{}
	assert.NoError(t, (<-done).err)
	assert.Equal(t, []string{"a:1"}, svc.pulls)
}

func TestRegistryQPSRefusesPullsPastTheBurst(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	svc := newFakePullService()
	rec := record.NewFakeRecorder(100)
	m := NewImageManager(rec, svc, NewImageBackOff(clk), PullConfig{SerializeImagePulls: true, RegistryPullQPS: 1, RegistryBurst: 2})
	pod, ref := testPod("a")

	for _, img := range []string{"a:1", "b:1"} {
		_, _, err := m.EnsureImageExists(ctx, ref, pod, img, nil, nil, v1.PullIfNotPresent)
		require.NoError(t, err, img)
	}
	drain(rec)
	_, msg, err := m.EnsureImageExists(ctx, ref, pod, "c:1", nil, nil, v1.PullIfNotPresent)
	require.ErrorIs(t, err, ErrImagePull)
	assert.Equal(t, "pull QPS exceeded", msg)
	assert.Equal(t, []string{`Normal Pulling Pulling image "c:1"`, `Warning Failed Failed to pull image "c:1": pull QPS exceeded`}, drain(rec))
	assert.Equal(t, []string{"a:1", "b:1"}, svc.pulls, "the refused pull never reached the runtime")

	// A second later one token is back: another image pulls.
	clk.Step(time.Second)
	_, _, err = m.EnsureImageExists(ctx, ref, pod, "d:1", nil, nil, v1.PullIfNotPresent)
	require.NoError(t, err)
	_, _, err = m.EnsureImageExists(ctx, ref, pod, "e:1", nil, nil, v1.PullIfNotPresent)
	require.ErrorIs(t, err, ErrImagePull)
}

func TestPullConfigValidate(t *testing.T) {
	assert.NoError(t, DefaultPullConfig().Validate())
	assert.NoError(t, PullConfig{MaxParallelImagePulls: ptr.To[int32](5)}.Validate())
	assert.NoError(t, PullConfig{SerializeImagePulls: true, MaxParallelImagePulls: ptr.To[int32](1)}.Validate())
	assert.EqualError(t, PullConfig{SerializeImagePulls: true, MaxParallelImagePulls: ptr.To[int32](2)}.Validate(),
		"invalid configuration: maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false")
	assert.EqualError(t, PullConfig{MaxParallelImagePulls: ptr.To[int32](0)}.Validate(),
		"invalid configuration: maxParallelImagePulls 0 must be a positive number")
	assert.EqualError(t, PullConfig{RegistryPullQPS: -1}.Validate(),
		"invalid configuration: registryPullQPS (--registry-qps) -1 must not be a negative number")
	assert.EqualError(t, PullConfig{RegistryBurst: -1}.Validate(),
		"invalid configuration: registryBurst (--registry-burst) -1 must not be a negative number")
}

func TestDefaultPullConfigIsUpstreams(t *testing.T) {
	assert.Equal(t, PullConfig{SerializeImagePulls: true, RegistryPullQPS: 5, RegistryBurst: 10}, DefaultPullConfig())
	assert.Equal(t, 10*time.Second, InitialImagePullBackOff)
	assert.Equal(t, 300*time.Second, MaxImagePullBackOff)
}
