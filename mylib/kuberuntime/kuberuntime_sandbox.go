package kuberuntime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "mykubelet/mylib/container"
	runtimeutil "mykubelet/mylib/kuberuntime/util"
	"mykubelet/mylib/sysctl"
)

// DefaultPodLogsDirectory is where the kubelet asks runtimes to write
// container logs, as upstream's --pod-logs-dir default.
const DefaultPodLogsDirectory = "/var/log/pods"

// BuildPodLogsDirectory is a pod's log directory: <root>/<ns>_<name>_<uid>.
func BuildPodLogsDirectory(root, namespace, name string, uid types.UID) string {
	return filepath.Join(root, strings.Join([]string{namespace, name, string(uid)}, "_"))
}

// BuildContainerLogsDirectory is <pod log dir>/<container>.
func BuildContainerLogsDirectory(root, namespace, name string, uid types.UID, containerName string) string {
	return filepath.Join(BuildPodLogsDirectory(root, namespace, name, uid), containerName)
}

// buildContainerLogsPath is a container's log file relative to its pod's
// log directory: <container>/<attempt>.log.
func buildContainerLogsPath(containerName string, restartCount int) string {
	return filepath.Join(containerName, fmt.Sprintf("%d.log", restartCount))
}

// generatePodSandboxConfig builds the sandbox's CRI config from the pod:
// metadata, labels, annotations, hostname, DNS, log directory, port
// mappings, and its Linux part (generatePodSandboxLinuxConfig).
func (m *Manager) generatePodSandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	config := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Labels:       newPodLabels(pod),
		Annotations:  newPodAnnotations(pod),
		LogDirectory: BuildPodLogsDirectory(m.podLogsDirectory, pod.Namespace, pod.Name, pod.UID),
	}
	helper := m.helper
	dns, err := helper.GetPodDNS(pod)
	if err != nil {
		return nil, err
	}
	config.DnsConfig = dns
	if !kubecontainer.IsHostNetworkPod(pod) {
		hostname, domain, err := helper.GeneratePodHostNameAndDomain(pod)
		if err != nil {
			return nil, err
		}
		if pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN && domain != "" {
			hostname = hostname + "." + domain
		}
		config.Hostname = hostname
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			config.PortMappings = append(config.PortMappings, &runtimeapi.PortMapping{
				Protocol:      toRuntimeProtocol(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	config.Linux = m.generatePodSandboxLinuxConfig(pod)
	return config, nil
}

// generatePodSandboxLinuxConfig is the sandbox's Linux part, as
// upstream's: the pod's cgroup as CgroupParent (the runtime makes the
// containers' cgroups under it; "" without pod cgroups) and the pod's
// namespaces (runtimeutil.NamespacesForPod: the PID namespace is the
// container's own unless the pod shares one); privileged if any of its
// containers is (CRI runtimes refuse a privileged container in an
// unprivileged sandbox); the RuntimeDefault seccomp profile (upstream
// forces it on the pause container); and the pod's user, group,
// fsGroup then supplementalGroups, and SELinux options; and the pod's
// sysctls, their names with dots.
func (m *Manager) generatePodSandboxLinuxConfig(pod *v1.Pod) *runtimeapi.LinuxPodSandboxConfig {
	lc := &runtimeapi.LinuxPodSandboxConfig{
		CgroupParent: m.helper.GetPodCgroupParent(pod),
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: runtimeutil.NamespacesForPod(pod),
			Privileged:       hasPrivilegedContainer(pod),
			Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		},
	}
	lc.Sysctls = sysctl.PodSysctls(pod) // with dots: runc refuses kernel/shm_rmid_forced
	if psc := pod.Spec.SecurityContext; psc != nil {
		sc := lc.SecurityContext
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if o := psc.SELinuxOptions; o != nil {
			sc.SelinuxOptions = &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
		}
	}
	return lc
}

func toRuntimeProtocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// createPodSandbox makes the pod's log directory and asks the runtime for a
// sandbox. It returns the sandbox ID, or a message and an error.
func (m *Manager) createPodSandbox(ctx context.Context, pod *v1.Pod, attempt uint32) (string, string, error) {
	config, err := m.generatePodSandboxConfig(pod, attempt)
	if err != nil {
		msg := fmt.Sprintf("Failed to generate sandbox config for pod %s/%s: %v", pod.Namespace, pod.Name, err)
		return "", msg, err
	}
	if err := os.MkdirAll(config.LogDirectory, 0o755); err != nil {
		msg := fmt.Sprintf("Failed to create log directory for pod %s/%s: %v", pod.Namespace, pod.Name, err)
		return "", msg, err
	}
	resp, err := m.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: m.runtimeHandler})
	if err != nil {
		msg := fmt.Sprintf("Failed to create sandbox for pod %s/%s: %v", pod.Namespace, pod.Name, err)
		return "", msg, err
	}
	return resp.PodSandboxId, "", nil
}

// determinePodSandboxIPs are the sandbox's IPs, primary first.
func determinePodSandboxIPs(status *runtimeapi.PodSandboxStatus) []string {
	var ips []string
	if ip := status.GetNetwork().GetIp(); ip != "" {
		ips = append(ips, ip)
	}
	for _, ip := range status.GetNetwork().GetAdditionalIps() {
		if ip.GetIp() != "" {
			ips = append(ips, ip.GetIp())
		}
	}
	return ips
}
