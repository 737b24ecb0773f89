package kuberuntime

import (
	"context"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/metrics"
)

// The CRI clients with metrics (upstream's instrumented_services.go): each
// call counts in kubelet_runtime_operations_total and
// kubelet_runtime_operations_duration_seconds under upstream's operation
// name, and its error in kubelet_runtime_operations_errors_total. Upstream
// wraps its own CRI interfaces; ours wrap the gRPC clients themselves, so
// that every user of the CRI (the runtime manager, the PLEG through it,
// exec probes, the log manager, the stats provider) is counted. The image
// client also tells the pod start SLI when a pod's image pull begins and
// ends (upstream's image manager does), from the pull's sandbox config.

// NewInstrumentedRuntimeService returns rs recording into m; with a nil m,
// rs itself.
func NewInstrumentedRuntimeService(rs runtimeapi.RuntimeServiceClient, m *metrics.Metrics) runtimeapi.RuntimeServiceClient {
	if m == nil || rs == nil {
		return rs
	}
	return &instrumentedRuntimeService{RuntimeServiceClient: rs, m: m}
}

// NewInstrumentedImageService returns is recording into m; with a nil m,
// is itself.
func NewInstrumentedImageService(is runtimeapi.ImageServiceClient, m *metrics.Metrics) runtimeapi.ImageServiceClient {
	if m == nil || is == nil {
		return is
	}
	return &instrumentedImageService{ImageServiceClient: is, m: m}
}

// instrumentedRuntimeService embeds the client for the calls it does not
// list (none today; a method a later CRI adds passes through uncounted).
type instrumentedRuntimeService struct {
	runtimeapi.RuntimeServiceClient
	m *metrics.Metrics
}

type instrumentedImageService struct {
	runtimeapi.ImageServiceClient
	m *metrics.Metrics
}

// call is one CRI call of operation, counted.
func call[Req, Resp any](m *metrics.Metrics, operation string, f func(context.Context, Req, ...grpc.CallOption) (Resp, error),
	ctx context.Context, req Req, opts []grpc.CallOption) (Resp, error) {
	start := m.Now()
	resp, err := f(ctx, req, opts...)
	m.RecordRuntimeOperation(operation, start, err)
	return resp, err
}

func (in *instrumentedRuntimeService) Version(ctx context.Context, r *runtimeapi.VersionRequest, o ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	return call(in.m, "version", in.RuntimeServiceClient.Version, ctx, r, o)
}

func (in *instrumentedRuntimeService) Status(ctx context.Context, r *runtimeapi.StatusRequest, o ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	return call(in.m, "status", in.RuntimeServiceClient.Status, ctx, r, o)
}

func (in *instrumentedRuntimeService) RunPodSandbox(ctx context.Context, r *runtimeapi.RunPodSandboxRequest, o ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	start := in.m.Now()
	resp, err := call(in.m, "run_podsandbox", in.RuntimeServiceClient.RunPodSandbox, ctx, r, o)
	in.m.RecordRunPodSandbox(r.GetRuntimeHandler(), start, err)
	return resp, err
}

func (in *instrumentedRuntimeService) StopPodSandbox(ctx context.Context, r *runtimeapi.StopPodSandboxRequest, o ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error) {
	return call(in.m, "stop_podsandbox", in.RuntimeServiceClient.StopPodSandbox, ctx, r, o)
}

func (in *instrumentedRuntimeService) RemovePodSandbox(ctx context.Context, r *runtimeapi.RemovePodSandboxRequest, o ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error) {
	return call(in.m, "remove_podsandbox", in.RuntimeServiceClient.RemovePodSandbox, ctx, r, o)
}

func (in *instrumentedRuntimeService) PodSandboxStatus(ctx context.Context, r *runtimeapi.PodSandboxStatusRequest, o ...grpc.CallOption) (*runtimeapi.PodSandboxStatusResponse, error) {
	return call(in.m, "podsandbox_status", in.RuntimeServiceClient.PodSandboxStatus, ctx, r, o)
}

func (in *instrumentedRuntimeService) ListPodSandbox(ctx context.Context, r *runtimeapi.ListPodSandboxRequest, o ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	return call(in.m, "list_podsandbox", in.RuntimeServiceClient.ListPodSandbox, ctx, r, o)
}

func (in *instrumentedRuntimeService) CreateContainer(ctx context.Context, r *runtimeapi.CreateContainerRequest, o ...grpc.CallOption) (*runtimeapi.CreateContainerResponse, error) {
	return call(in.m, "create_container", in.RuntimeServiceClient.CreateContainer, ctx, r, o)
}

func (in *instrumentedRuntimeService) StartContainer(ctx context.Context, r *runtimeapi.StartContainerRequest, o ...grpc.CallOption) (*runtimeapi.StartContainerResponse, error) {
	return call(in.m, "start_container", in.RuntimeServiceClient.StartContainer, ctx, r, o)
}

func (in *instrumentedRuntimeService) StopContainer(ctx context.Context, r *runtimeapi.StopContainerRequest, o ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	return call(in.m, "stop_container", in.RuntimeServiceClient.StopContainer, ctx, r, o)
}

func (in *instrumentedRuntimeService) RemoveContainer(ctx context.Context, r *runtimeapi.RemoveContainerRequest, o ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error) {
	return call(in.m, "remove_container", in.RuntimeServiceClient.RemoveContainer, ctx, r, o)
}

func (in *instrumentedRuntimeService) ListContainers(ctx context.Context, r *runtimeapi.ListContainersRequest, o ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	return call(in.m, "list_containers", in.RuntimeServiceClient.ListContainers, ctx, r, o)
}

func (in *instrumentedRuntimeService) ContainerStatus(ctx context.Context, r *runtimeapi.ContainerStatusRequest, o ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	return call(in.m, "container_status", in.RuntimeServiceClient.ContainerStatus, ctx, r, o)
}

func (in *instrumentedRuntimeService) UpdateContainerResources(ctx context.Context, r *runtimeapi.UpdateContainerResourcesRequest, o ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	return call(in.m, "update_container", in.RuntimeServiceClient.UpdateContainerResources, ctx, r, o)
}

func (in *instrumentedRuntimeService) ReopenContainerLog(ctx context.Context, r *runtimeapi.ReopenContainerLogRequest, o ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error) {
	return call(in.m, "reopen_container_log", in.RuntimeServiceClient.ReopenContainerLog, ctx, r, o)
}

func (in *instrumentedRuntimeService) ExecSync(ctx context.Context, r *runtimeapi.ExecSyncRequest, o ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	return call(in.m, "exec_sync", in.RuntimeServiceClient.ExecSync, ctx, r, o)
}

func (in *instrumentedRuntimeService) Exec(ctx context.Context, r *runtimeapi.ExecRequest, o ...grpc.CallOption) (*runtimeapi.ExecResponse, error) {
	return call(in.m, "exec", in.RuntimeServiceClient.Exec, ctx, r, o)
}

func (in *instrumentedRuntimeService) Attach(ctx context.Context, r *runtimeapi.AttachRequest, o ...grpc.CallOption) (*runtimeapi.AttachResponse, error) {
	return call(in.m, "attach", in.RuntimeServiceClient.Attach, ctx, r, o)
}

func (in *instrumentedRuntimeService) PortForward(ctx context.Context, r *runtimeapi.PortForwardRequest, o ...grpc.CallOption) (*runtimeapi.PortForwardResponse, error) {
	return call(in.m, "port_forward", in.RuntimeServiceClient.PortForward, ctx, r, o)
}

func (in *instrumentedRuntimeService) ContainerStats(ctx context.Context, r *runtimeapi.ContainerStatsRequest, o ...grpc.CallOption) (*runtimeapi.ContainerStatsResponse, error) {
	return call(in.m, "container_stats", in.RuntimeServiceClient.ContainerStats, ctx, r, o)
}

func (in *instrumentedRuntimeService) ListContainerStats(ctx context.Context, r *runtimeapi.ListContainerStatsRequest, o ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	return call(in.m, "list_container_stats", in.RuntimeServiceClient.ListContainerStats, ctx, r, o)
}

func (in *instrumentedRuntimeService) PodSandboxStats(ctx context.Context, r *runtimeapi.PodSandboxStatsRequest, o ...grpc.CallOption) (*runtimeapi.PodSandboxStatsResponse, error) {
	return call(in.m, "podsandbox_stats", in.RuntimeServiceClient.PodSandboxStats, ctx, r, o)
}

func (in *instrumentedRuntimeService) ListPodSandboxStats(ctx context.Context, r *runtimeapi.ListPodSandboxStatsRequest, o ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return call(in.m, "list_podsandbox_stats", in.RuntimeServiceClient.ListPodSandboxStats, ctx, r, o)
}

func (in *instrumentedRuntimeService) UpdateRuntimeConfig(ctx context.Context, r *runtimeapi.UpdateRuntimeConfigRequest, o ...grpc.CallOption) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	return call(in.m, "update_runtime_config", in.RuntimeServiceClient.UpdateRuntimeConfig, ctx, r, o)
}

func (in *instrumentedRuntimeService) RuntimeConfig(ctx context.Context, r *runtimeapi.RuntimeConfigRequest, o ...grpc.CallOption) (*runtimeapi.RuntimeConfigResponse, error) {
	return call(in.m, "runtime_config", in.RuntimeServiceClient.RuntimeConfig, ctx, r, o)
}

func (in *instrumentedRuntimeService) CheckpointContainer(ctx context.Context, r *runtimeapi.CheckpointContainerRequest, o ...grpc.CallOption) (*runtimeapi.CheckpointContainerResponse, error) {
	return call(in.m, "checkpoint_container", in.RuntimeServiceClient.CheckpointContainer, ctx, r, o)
}

func (in *instrumentedRuntimeService) ListMetricDescriptors(ctx context.Context, r *runtimeapi.ListMetricDescriptorsRequest, o ...grpc.CallOption) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return call(in.m, "list_metric_descriptors", in.RuntimeServiceClient.ListMetricDescriptors, ctx, r, o)
}

func (in *instrumentedRuntimeService) ListPodSandboxMetrics(ctx context.Context, r *runtimeapi.ListPodSandboxMetricsRequest, o ...grpc.CallOption) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return call(in.m, "list_podsandbox_metrics", in.RuntimeServiceClient.ListPodSandboxMetrics, ctx, r, o)
}

func (in *instrumentedRuntimeService) UpdatePodSandboxResources(ctx context.Context, r *runtimeapi.UpdatePodSandboxResourcesRequest, o ...grpc.CallOption) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return call(in.m, "update_podsandbox_resources", in.RuntimeServiceClient.UpdatePodSandboxResources, ctx, r, o)
}

func (in *instrumentedImageService) ListImages(ctx context.Context, r *runtimeapi.ListImagesRequest, o ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error) {
	return call(in.m, "list_images", in.ImageServiceClient.ListImages, ctx, r, o)
}

func (in *instrumentedImageService) ImageStatus(ctx context.Context, r *runtimeapi.ImageStatusRequest, o ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error) {
	return call(in.m, "image_status", in.ImageServiceClient.ImageStatus, ctx, r, o)
}

// PullImage is also a pod's image pull for the pod start SLI, which
// leaves it out.
func (in *instrumentedImageService) PullImage(ctx context.Context, r *runtimeapi.PullImageRequest, o ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	uid := types.UID(r.GetSandboxConfig().GetMetadata().GetUid())
	if uid != "" {
		in.m.RecordImageStartedPulling(uid)
		defer in.m.RecordImageFinishedPulling(uid)
	}
	return call(in.m, "pull_image", in.ImageServiceClient.PullImage, ctx, r, o)
}

func (in *instrumentedImageService) RemoveImage(ctx context.Context, r *runtimeapi.RemoveImageRequest, o ...grpc.CallOption) (*runtimeapi.RemoveImageResponse, error) {
	return call(in.m, "remove_image", in.ImageServiceClient.RemoveImage, ctx, r, o)
}

func (in *instrumentedImageService) ImageFsInfo(ctx context.Context, r *runtimeapi.ImageFsInfoRequest, o ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error) {
	return call(in.m, "image_fs_info", in.ImageServiceClient.ImageFsInfo, ctx, r, o)
}
