package kubelet

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/events"
	"mykubelet/mylib/images"
	"mykubelet/mylib/nodestatus"
)

// NodeStatusOptions describe the node for upstream's default status
// setters (NodeConfig.Status).
type NodeStatusOptions struct {
	// NodeIP is the InternalIP; nil means the address of the interface
	// with the default route.
	NodeIP net.IP
	// MaxPods is the pods capacity; zero means nodestatus.DefaultMaxPods.
	MaxPods int
	// Port is the kubelet port in status.daemonEndpoints; zero means
	// nodestatus.DefaultKubeletPort.
	Port int32
	// RootDir is the directory whose filesystem is the node's
	// ephemeral-storage capacity (the kubelet's --root-dir). Required.
	RootDir string
	// Capacity overrides measured capacity; SystemReserved is taken off
	// allocatable.
	Capacity, SystemReserved v1.ResourceList
	// RuntimeVersion is the <type>://<version> reported while the Kubelet
	// has no runtime to ask (a node half alone); with a runtime, the CRI's
	// Version answers.
	RuntimeVersion string
	// MockMachine overrides the host's memory and nodefs sizes; the node
	// then reports IDs of its own (cadvisor.MachineInfo.NodeIDs).
	MockMachine cadvisor.MockMachine
	// NodeStatusMaxImages caps status.images (the KubeletConfiguration's
	// nodeStatusMaxImages: -1 no cap, 0 none); nil means
	// nodestatus.DefaultNodeStatusMaxImages, 50.
	NodeStatusMaxImages *int32
}

// defaultNodeStatusFuncs are the setters in the order of upstream's
// defaultNodeStatusFuncs (Ready last): the runtime's version comes from
// the CRI, the images from the image GC manager or the CRI (nodeImageList),
// Ready follows the runtime's health (RuntimeErrors) when the Kubelet has
// a pod half, and the pressure conditions follow the eviction manager
// (never pressure without one). The conditions and MachineInfo record the
// node's events (recordNodeStatusEvent) when the Kubelet has a recorder.
func (kl *Kubelet) defaultNodeStatusFuncs(o NodeStatusOptions) []nodestatus.Setter {
	if o.MaxPods == 0 {
		o.MaxPods = nodestatus.DefaultMaxPods
	}
	if o.Port == 0 {
		o.Port = nodestatus.DefaultKubeletPort
	}
	maxImages := int32(nodestatus.DefaultNodeStatusMaxImages)
	if o.NodeStatusMaxImages != nil {
		maxImages = *o.NodeStatusMaxImages
	}
	machineInfo := sync.OnceValues(func() (*cadvisor.MachineInfo, error) { return cadvisor.ReadMachineInfoOf(o.RootDir, o.MockMachine) })
	runtimeVersion := func(ctx context.Context) (string, error) {
		if kl.cri == nil {
			return o.RuntimeVersion, nil // no runtime: what we were told, if anything
		}
		return kl.RuntimeVersion(ctx)
	}
	return []nodestatus.Setter{
		nodestatus.NodeAddress(o.NodeIP, kl.nodeName, utilnet.ResolveBindAddress),
		nodestatus.MachineInfo(o.MaxPods, machineInfo, o.Capacity, nodestatus.NodeAllocatableReservation(o.SystemReserved, nil), kl.recordEvent),
		nodestatus.VersionInfo(machineInfo, runtimeVersion, KubeletVersion),
		nodestatus.DaemonEndpoints(o.Port),
		nodestatus.Images(maxImages, kl.nodeImageList),
		nodestatus.GoRuntime(),
		nodestatus.MemoryPressureCondition(kl.clock.Now, kl.isUnderMemoryPressure, kl.recordNodeStatusEvent),
		nodestatus.DiskPressureCondition(kl.clock.Now, kl.isUnderDiskPressure, kl.recordNodeStatusEvent),
		nodestatus.PIDPressureCondition(kl.clock.Now, kl.isUnderPIDPressure, kl.recordNodeStatusEvent),
		nodestatus.ReadyCondition(kl.clock.Now, kl.RuntimeErrors, nodestatus.RequiredCapacities, kl.recordNodeStatusEvent),
	}
}

// nodeImageList is the images for status.images, largest first: the
// image GC manager's list when the Kubelet has one (upstream's
// imageManager.GetImageList, refreshed every images.ImageListCachePeriod),
// else the CRI's ListImages, asked at each status; none without a runtime
// that runs containers.
func (kl *Kubelet) nodeImageList(ctx context.Context) ([]images.Image, error) {
	if kl.nodePressure != nil && kl.nodePressure.imageGC != nil {
		return kl.nodePressure.imageGC.GetImageList()
	}
	rt, ok := kl.containerRuntime.(interface {
		ImageService() runtimeapi.ImageServiceClient
	})
	if !ok {
		return nil, nil
	}
	resp, err := rt.ImageService().ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListImages: %w", err)
	}
	list := make([]images.Image, 0, len(resp.GetImages()))
	for _, img := range resp.GetImages() {
		list = append(list, images.Image{ID: img.GetId(), RepoTags: img.GetRepoTags(), RepoDigests: img.GetRepoDigests(),
			Size: int64(img.GetSize()), Pinned: img.GetPinned()})
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].Size > list[j].Size })
	return list, nil
}

// nodeRef is what the node's events are recorded on (upstream's
// Kubelet.nodeRef): the Node, with the node's name as its UID, the one
// kubectl describe node looks for beside the Node's own UID.
func (kl *Kubelet) nodeRef() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: kl.nodeName, UID: types.UID(kl.nodeName)}
}

// nodeEventRecorder is NodeConfig.Recorder, else the pod half's
// (PodsConfig.Recorder); nil when there is neither.
func (kl *Kubelet) nodeEventRecorder() record.EventRecorder {
	if kl.node != nil && kl.node.recorder != nil {
		return kl.node.recorder
	}
	return kl.recorder
}

// recordNodeStatusEvent records a condition's event on the node, as
// upstream's: "Node <name> status is now: <event>".
func (kl *Kubelet) recordNodeStatusEvent(eventType, event string) {
	klog.V(2).InfoS("Recording event message for node", "node", kl.nodeName, "event", event)
	kl.recordEvent(eventType, event, fmt.Sprintf("Node %s status is now: %s", kl.nodeName, event))
}

// recordEvent records an event on the node, when there is a recorder.
func (kl *Kubelet) recordEvent(eventType, event, message string) {
	if r := kl.nodeEventRecorder(); r != nil {
		r.Event(kl.nodeRef(), eventType, event, message)
	}
}

// BirthCry records the Starting event on the node, "Starting kubelet."
// (upstream's BirthCry, which cmd/kubelet/app calls just before Run; here
// Run calls it), when the Kubelet has a recorder.
func (kl *Kubelet) BirthCry() {
	kl.recordEvent(v1.EventTypeNormal, events.StartingKubelet, "Starting kubelet.")
}
