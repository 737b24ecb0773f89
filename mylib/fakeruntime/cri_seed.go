package fakeruntime

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/kubetypes"
)

// SeedPod describes one sample pod: one sandbox with one running container.
type SeedPod struct {
	Namespace, Name, UID string
	Container, Image     string
	// Command is the container's command; empty runs the image's default
	// (see KnownImages).
	Command []string
}

// SeedBusyboxScript is what the sample busybox container runs: it ticks
// every 10 seconds and, on SIGTERM, says so and exits 1.
const SeedBusyboxScript = `trap 'echo "got SIGTERM, exiting 1"; exit 1' TERM
echo "hello from $HOSTNAME"
while true; do sleep 10; echo tick; done`

// SeedPods are the sample pods Seed creates, like the two pods of the course
// this tutorial grew from.
var SeedPods = []SeedPod{
	{Namespace: "default", Name: "nginx", UID: "6a5e2f7c-3b1d-4e8a-9c47-0d2f8b6e1a53", Container: "nginx", Image: "docker.io/library/nginx:1.27"},
	{Namespace: "default", Name: "busybox", UID: "c3d9a8e1-7f42-4b6c-8e05-9a1b2c3d4e5f", Container: "busybox", Image: "docker.io/library/busybox:1.36",
		Command: []string{"sh", "-c", SeedBusyboxScript}},
}

// Seed creates the SeedPods through the same CRI calls the kubelet makes
// (PullImage, RunPodSandbox, CreateContainer, StartContainer), with the
// kubelet's labels, so that every pod is READY with a RUNNING container.
func (r *Runtime) Seed(ctx context.Context) error {
	for _, p := range SeedPods {
		if err := r.RunPod(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// RunPod creates one pod like a SeedPod: a READY sandbox and a RUNNING
// container, labelled as the kubelet labels them.
func (r *Runtime) RunPod(ctx context.Context, p SeedPod) error {
	// The labels the kubelet puts on sandboxes and containers: its GetPods
	// groups by them, so a seeded pod is a pod to it.
	podLabels := map[string]string{kubetypes.KubernetesPodNameLabel: p.Name,
		kubetypes.KubernetesPodNamespaceLabel: p.Namespace, kubetypes.KubernetesPodUIDLabel: p.UID}
	if _, err := r.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: p.Image}}); err != nil {
		return fmt.Errorf("seed pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	sb, err := r.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: p.Name, Namespace: p.Namespace, Uid: p.UID},
		Labels:   podLabels,
	}})
	if err != nil {
		return fmt.Errorf("seed pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	cLabels := copyMap(podLabels)
	cLabels[kubetypes.KubernetesContainerNameLabel] = p.Container
	c, err := r.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId,
		Config: &runtimeapi.ContainerConfig{
			Metadata:    &runtimeapi.ContainerMetadata{Name: p.Container},
			Image:       &runtimeapi.ImageSpec{Image: p.Image},
			Command:     p.Command,
			Labels:      cLabels,
			Annotations: map[string]string{kubetypes.ContainerRestartCountAnnotation: "0"},
		},
	})
	if err != nil {
		return fmt.Errorf("seed pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if _, err := r.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		return fmt.Errorf("seed pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
