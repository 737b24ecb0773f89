package kubelet

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/cadvisor"
	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/images"
)

// nodeEvents is a fake record.EventRecorder that keeps the object each
// event is on.
type nodeEvents struct {
	mu     sync.Mutex
	events []string
	refs   []*v1.ObjectReference
}

func (r *nodeEvents) Event(object runtime.Object, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventType+" "+reason+" "+message)
	ref, _ := object.(*v1.ObjectReference)
	r.refs = append(r.refs, ref)
}

func (r *nodeEvents) Eventf(object runtime.Object, eventType, reason, format string, args ...any) {
	r.Event(object, eventType, reason, fmt.Sprintf(format, args...))
}

func (r *nodeEvents) AnnotatedEventf(object runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	r.Eventf(object, eventType, reason, format, args...)
}

func (r *nodeEvents) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func newEventsKubelet(t *testing.T, recorder record.EventRecorder) *Kubelet {
	t.Helper()
	kl, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Clock: testingclock.NewFakeClock(t0), Node: &NodeConfig{
		Status:   &NodeStatusOptions{RootDir: t.TempDir(), NodeIP: []byte{127, 0, 0, 1}},
		Recorder: recorder,
	}})
	require.NoError(t, err)
	return kl
}

func TestNodeEventsOnRegistrationOnceAndOnTheNode(t *testing.T) {
	rec := &nodeEvents{}
	kl := newEventsKubelet(t, rec)
	ctx := context.Background()

	kl.BirthCry()
	require.NoError(t, kl.RegisterWithAPIServer(ctx))
	assert.Equal(t, []string{
		"Normal Starting Starting kubelet.",
		"Normal NodeHasSufficientMemory Node n1 status is now: NodeHasSufficientMemory",
		"Normal NodeHasNoDiskPressure Node n1 status is now: NodeHasNoDiskPressure",
		"Normal NodeHasSufficientPID Node n1 status is now: NodeHasSufficientPID",
	}, rec.take())
	for _, ref := range rec.refs {
		require.NotNil(t, ref)
		assert.Equal(t, v1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}, *ref,
			"on the Node, with its name as UID: what kubectl describe node looks for")
	}

	kl.SyncNodeStatus(ctx) // the first report: the node as created, nothing changed
	kl.SyncNodeStatus(ctx)
	assert.Empty(t, rec.take(), "no transition, no event")
}

func TestNodeEventsUseThePodHalfsRecorderWhenTheNodeHasNone(t *testing.T) {
	rec := &nodeEvents{}
	kl := newEventsKubelet(t, nil)
	kl.recorder = rec // as newPodHalf sets it from PodsConfig.Recorder
	kl.BirthCry()
	assert.Equal(t, []string{"Normal Starting Starting kubelet."}, rec.take())
}

func TestNodeEventsWithoutARecorderAreDropped(t *testing.T) {
	kl := newEventsKubelet(t, nil)
	kl.BirthCry()
	require.NoError(t, kl.RegisterWithAPIServer(context.Background())) // no panic on a nil recorder
}

// fakeImageService answers ListImages.
type fakeImageService struct {
	runtimeapi.ImageServiceClient
	images []*runtimeapi.Image
}

func (f *fakeImageService) ListImages(context.Context, *runtimeapi.ListImagesRequest, ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: f.images}, nil
}

// imageRuntime is a runtime manager that has an image service.
type imageRuntime struct {
	kubecontainer.Runtime
	is runtimeapi.ImageServiceClient
}

func (r imageRuntime) ImageService() runtimeapi.ImageServiceClient { return r.is }

// imageListGC is an image GC manager's list.
type imageListGC struct {
	images.ImageGCManager
	list []images.Image
}

func (f imageListGC) GetImageList() ([]images.Image, error) { return f.list, nil }

func TestNodeStatusImagesFromTheCRILargestFirst(t *testing.T) {
	kl, err := New(Config{Client: fake.NewClientset(), NodeName: "n1", Clock: testingclock.NewFakeClock(t0), Node: &NodeConfig{
		Status: &NodeStatusOptions{RootDir: t.TempDir(), NodeIP: []byte{127, 0, 0, 1}, NodeStatusMaxImages: ptr.To[int32](2)},
	}})
	require.NoError(t, err)
	node, err := kl.InitialNode(context.Background())
	require.NoError(t, err)
	assert.Empty(t, node.Status.Images, "no runtime: no images")

	kl.containerRuntime = imageRuntime{is: &fakeImageService{images: []*runtimeapi.Image{
		{Id: "sha256:p", RepoTags: []string{"registry.k8s.io/pause:3.10"}, Size: 700},
		{Id: "sha256:n", RepoTags: []string{"docker.io/library/nginx:latest"}, RepoDigests: []string{"docker.io/library/nginx@sha256:ab"}, Size: 70000},
		{Id: "sha256:b", RepoTags: []string{"docker.io/library/busybox:latest"}, Size: 4000},
	}}}
	node, err = kl.InitialNode(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []v1.ContainerImage{
		{Names: []string{"docker.io/library/nginx@sha256:ab", "docker.io/library/nginx:latest"}, SizeBytes: 70000},
		{Names: []string{"docker.io/library/busybox:latest"}, SizeBytes: 4000},
	}, node.Status.Images, "largest first, capped at nodeStatusMaxImages")
}

func TestNodeStatusImagesFromTheImageGCManagerFirst(t *testing.T) {
	kl := newEventsKubelet(t, nil)
	kl.containerRuntime = imageRuntime{is: &fakeImageService{images: []*runtimeapi.Image{{Id: "sha256:cri", RepoTags: []string{"cri:only"}, Size: 1}}}}
	gcList := []images.Image{{ID: "sha256:gc", RepoTags: []string{"gc:cached"}, Size: 5}}
	kl.nodePressure = &nodePressure{imageGC: imageListGC{list: gcList}}
	list, err := kl.nodeImageList(context.Background())
	require.NoError(t, err)
	assert.Equal(t, gcList, list, "the image GC manager's cached list, not a CRI call")
}

func TestNodeStatusDefaultMaxImagesIs50(t *testing.T) {
	var list []*runtimeapi.Image
	for i := range 60 {
		list = append(list, &runtimeapi.Image{Id: fmt.Sprint(i), RepoTags: []string{fmt.Sprintf("img%d:1", i)}, Size: uint64(100 + i)})
	}
	kl := newEventsKubelet(t, nil)
	kl.containerRuntime = imageRuntime{is: &fakeImageService{images: list}}
	node, err := kl.InitialNode(context.Background())
	require.NoError(t, err)
	require.Len(t, node.Status.Images, 50)
	assert.Equal(t, []string{"img59:1"}, node.Status.Images[0].Names)
}

func TestNodeIDsOfAMockMachineDifferPerNode(t *testing.T) {
	ids := map[string]bool{}
	for _, name := range []string{"n1", "n2"} {
		kl, err := New(Config{Client: fake.NewClientset(), NodeName: name, Clock: testingclock.NewFakeClock(t0), Node: &NodeConfig{
			Status: &NodeStatusOptions{RootDir: t.TempDir(), NodeIP: []byte{127, 0, 0, 1}, MockMachine: cadvisor.MockMachine{MemoryCapacity: 1 << 30}},
		}})
		require.NoError(t, err)
		node, err := kl.InitialNode(context.Background())
		require.NoError(t, err)
		info := node.Status.NodeInfo
		require.NotEmpty(t, info.SystemUUID)
		require.NotEmpty(t, info.MachineID)
		require.NotEmpty(t, info.BootID)
		ids[info.SystemUUID], ids[info.MachineID], ids[info.BootID] = true, true, true
	}
	assert.Len(t, ids, 6, "two mock nodes on one host: six different IDs")
}

// GetImageList gives the eviction tests' fakeImageGC (kubelet_eviction_test.go)
// the method the node status now calls: no images.
func (g *fakeImageGC) GetImageList() ([]images.Image, error) { return nil, nil }
