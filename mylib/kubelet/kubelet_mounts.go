package kubelet

// This file is upstream's container mounts (pkg/kubelet/kubelet_pods.go:
// makeMounts, makeHostsMount, ensureHostsFile, managedHostsFileContent;
// pkg/volume/util/subpath): what of the node a container sees, as
// kubecontainer.Mounts the runtime manager turns into CRI mounts. Departs
// from upstream:
//   - a subPath that is a file is hard-linked into
//     <pod dir>/volume-subpaths/<volume>/<container>/<index> where upstream
//     bind-mounts it there: the same inode either way, so, as upstream, the
//     container keeps the file it started with and never sees an update (the
//     atomic writer swaps the ..data symlink to a new directory and deletes
//     the old one; the link, like the bind mount, still holds the old file).
//     A subPath that is a directory is handed over as its resolved path,
//     and so is a volume's own path;
//   - a hostNetwork pod gets the node's /etc/hosts with its hostAliases
//     only when the kubelet is given the node's file
//     (PodRuntimeHelper.NodeHostsFile, a real runtime's kubelet), whatever
//     its podIPs; on the mock runtime none: nothing of the host's files
//     reaches a pod there;
//   - no propagation, SELinux relabelling, recursive read-only or image
//     volumes.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
)

const (
	// etcHostsPath is where a container sees the pod's hosts file.
	etcHostsPath = "/etc/hosts"
	// etcHostsMountName is the hosts file's Mount name, upstream's.
	etcHostsMountName = "k8s-managed-etc-hosts"
	// managedHostsHeader opens the pod's hosts file, as upstream's.
	managedHostsHeader = "# Kubernetes-managed hosts file.\n"
	// managedHostsHeaderWithHostNetwork opens a hostNetwork pod's: the
	// node's file follows.
	managedHostsHeaderWithHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
	// containerSubPathDirectoryName is where a subPath's file is linked,
	// in the pod's directory (upstream's name).
	containerSubPathDirectoryName = "volume-subpaths"
)

// getEtcHostsPath is the pod's hosts file: <pod dir>/etc-hosts.
func getEtcHostsPath(podDir string) string { return filepath.Join(podDir, "etc-hosts") }

// getPodContainerDir is <pod dir>/containers/<name>, where the runtime
// manager creates the container's termination-message files.
func getPodContainerDir(podDir, containerName string) string {
	return filepath.Join(podDir, "containers", containerName)
}

// makeMounts is what the container mounts: each volumeMount from its
// volume's directory (or a subPath in it, subPathExpr expanded from envs),
// or from its image if imageVolumes has the volume (the subPath is then
// the runtime's to resolve, in the image), read-only if the mount or the
// volume says so; then, for a pod on the pod network that has its IPs and
// a container that does not mount /etc/hosts itself, the pod's managed
// hosts file.
func makeMounts(pod *v1.Pod, podDir string, container *v1.Container, hostName, hostDomain string,
	podIPs []string, volumes kubecontainer.VolumeMap, envs []kubecontainer.EnvVar, imageVolumes kubecontainer.ImageVolumes) ([]kubecontainer.Mount, error) {
	mountEtcHosts := len(podIPs) > 0 && !pod.Spec.HostNetwork
	var mounts []kubecontainer.Mount
	for i, vm := range container.VolumeMounts {
		containerPath := vm.MountPath
		if !filepath.IsAbs(containerPath) {
			containerPath = "/" + containerPath
		}
		containerPath = filepath.Clean(containerPath)
		if containerPath == etcHostsPath {
			mountEtcHosts = false // the container brings its own
		}
		vol, ok := volumes[vm.Name]
		if !ok || vol.Mounter == nil {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, container.Name)
		}
		readOnly := vm.ReadOnly || vol.ReadOnly || vol.Mounter.GetAttributes().ReadOnly
		subPath := vm.SubPath
		if vm.SubPathExpr != "" {
			var err error
			if subPath, err = kubecontainer.ExpandContainerVolumeMounts(vm, envs); err != nil {
				return nil, err
			}
		}
		if image := imageVolumes[vm.Name]; image != nil {
			if filepath.IsAbs(subPath) {
				return nil, fmt.Errorf("error SubPath `%s` must not be an absolute path", subPath)
			}
			if slices.Contains(strings.Split(filepath.ToSlash(subPath), "/"), "..") {
				return nil, fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", subPath)
			}
			mounts = append(mounts, kubecontainer.Mount{Name: vm.Name, ContainerPath: containerPath,
				Image: image, ImageSubPath: subPath, ReadOnly: readOnly})
			continue
		}
		hostPath := vol.Mounter.GetPath()
		if hostPath == "" {
			return nil, fmt.Errorf("path is empty for volume %q", vm.Name)
		}
		if subPath != "" {
			p, err := prepareSubPath(podDir, container.Name, vm.Name, i, hostPath, subPath)
			if err != nil {
				return nil, err
			}
			hostPath = p
		} else if p, err := filepath.EvalSymlinks(hostPath); err == nil {
			// Resolved, as a subPath is: the mock runtime follows no
			// symlink below its mount roots (a hostPath may name one
			// inside the host root); a missing path is the runtime's to
			// report.
			hostPath = p
		}
		mounts = append(mounts, kubecontainer.Mount{
			Name:          vm.Name,
			ContainerPath: containerPath,
			HostPath:      hostPath,
			ReadOnly:      readOnly,
		})
	}
	if mountEtcHosts {
		hostsFile := getEtcHostsPath(podDir)
		if err := ensureHostsFile(hostsFile, podIPs, hostName, hostDomain, pod.Spec.HostAliases); err != nil {
			return nil, err
		}
		mounts = append(mounts, kubecontainer.Mount{Name: etcHostsMountName, ContainerPath: etcHostsPath, HostPath: hostsFile})
	}
	return mounts, nil
}

// prepareSubPath is the node's path of subPath in the volume at
// volumePath, refusing what would leave the volume: an absolute subPath,
// a ".." in it, a symlink in the volume that leads out of it. A missing
// subPath is made as a directory (with the volume directory's mode), as
// upstream. A file is linked into volume-subpaths (see the file's
// comment), the link kept for the pod's life, as upstream keeps its bind
// mount: a restarted container gets the same file.
//
// As upstream, the error names no host path: the details are logged.
func prepareSubPath(podDir, containerName, volumeName string, index int, volumePath, subPath string) (string, error) {
	if filepath.IsAbs(subPath) {
		return "", fmt.Errorf("error SubPath `%s` must not be an absolute path", subPath)
	}
	if slices.Contains(strings.Split(filepath.ToSlash(subPath), "/"), "..") {
		return "", fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", subPath)
	}
	failed := fmt.Errorf("failed to prepare subPath for volumeMount %q of container %q", volumeName, containerName)
	for _, name := range []string{containerName, volumeName} {
		if len(utilvalidation.IsDNS1123Label(name)) > 0 { // both name a directory below
			return "", failed
		}
	}

	base, err := filepath.EvalSymlinks(volumePath)
	if err != nil {
		klog.ErrorS(err, "Failed to prepare subPath for volumeMount of the container", "containerName", containerName, "volumeMountName", volumeName)
		return "", failed
	}
	if _, err := os.Stat(filepath.Join(base, subPath)); errors.Is(err, os.ErrNotExist) {
		if err := safeMakeDir(base, subPath); err != nil {
			klog.ErrorS(err, "Failed to create subPath directory for volumeMount of the container", "containerName", containerName, "volumeMountName", volumeName)
			return "", fmt.Errorf("failed to create subPath directory for volumeMount %q of container %q", volumeName, containerName)
		}
	}
	resolved, err := filepath.EvalSymlinks(filepath.Join(base, subPath))
	if err == nil && !pathWithinBase(resolved, base) {
		err = fmt.Errorf("subpath %q not within volume path %q", resolved, base)
	}
	if err != nil {
		klog.ErrorS(err, "Failed to prepare subPath for volumeMount of the container", "containerName", containerName, "volumeMountName", volumeName)
		return "", failed
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		klog.ErrorS(err, "Failed to prepare subPath for volumeMount of the container", "containerName", containerName, "volumeMountName", volumeName)
		return "", failed
	}
	if fi.IsDir() {
		return resolved, nil
	}
	if !fi.Mode().IsRegular() {
		klog.ErrorS(nil, "SubPath is neither a directory nor a regular file", "containerName", containerName, "volumeMountName", volumeName, "mode", fi.Mode())
		return "", failed
	}

	target := filepath.Join(podDir, containerSubPathDirectoryName, volumeName, containerName, strconv.Itoa(index))
	if ti, err := os.Lstat(target); err == nil && ti.Mode().IsRegular() {
		return target, nil // linked at an earlier start: the same file, as upstream's kept bind mount
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		klog.ErrorS(err, "Failed to prepare subPath for volumeMount of the container", "containerName", containerName, "volumeMountName", volumeName)
		return "", failed
	}
	_ = os.Remove(target) // whatever was there is not a file we linked; a missing one is fine
	// link(2) does not follow a symlink: if the container swapped the file
	// for one since the checks, the link is that symlink and is refused.
	if err := os.Link(resolved, target); err != nil {
		// E.g. a kubelet that is not root may not link a file the
		// container made (fs.protected_hardlinks): the file's own path
		// then, which follows what happens to it.
		klog.V(2).InfoS("Cannot link the subPath file, mounting its path", "containerName", containerName, "volumeMountName", volumeName, "err", err)
		return resolved, nil
	}
	if ti, err := os.Lstat(target); err != nil || !ti.Mode().IsRegular() {
		_ = os.Remove(target) // refused below either way
		klog.ErrorS(err, "SubPath changed while it was prepared", "containerName", containerName, "volumeMountName", volumeName)
		return "", failed
	}
	return target, nil
}

// safeMakeDir makes the directories of subPath under base that are
// missing, one component at a time, never following a symlink out of
// base (upstream's subpath SafeMakeDir), each with base's mode, its
// setgid and sticky bits included (an emptyDir on tmpfs with an fsGroup is
// drwxrwsrwt: its subPath too).
func safeMakeDir(base, subPath string) error {
	bi, err := os.Stat(base)
	if err != nil {
		return err
	}
	mode := bi.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSticky)
	cur := base
	for _, part := range strings.Split(filepath.Clean(subPath), string(filepath.Separator)) {
		if part == "" || part == "." {
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.Mkdir(next, mode.Perm()); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			if err := os.Chmod(next, mode); err != nil { // past the umask, with the bits mkdir leaves out
				return err
			}
			cur = next
		case err != nil:
			return err
		case fi.Mode()&os.ModeSymlink != 0:
			r, err := filepath.EvalSymlinks(next)
			if err != nil {
				return err
			}
			if !pathWithinBase(r, base) {
				return fmt.Errorf("subpath %q not within volume path %q", r, base)
			}
			cur = r
		default:
			cur = next // an existing directory, or the subPath's file itself
		}
	}
	return nil
}

// pathWithinBase says whether fullPath is base or below it.
func pathWithinBase(fullPath, base string) bool {
	rel, err := filepath.Rel(base, fullPath)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// ensureHostsFile writes the pod's hosts file (0644) if its content
// differs from what is there: the first container's start writes it and
// the pod's other containers share it; a new sandbox with other IPs
// rewrites it. Upstream writes it at every container start.
func ensureHostsFile(fileName string, podIPs []string, hostName, hostDomain string, hostAliases []v1.HostAlias) error {
	return writeHostsFile(fileName, managedHostsFileContent(podIPs, hostName, hostDomain, hostAliases))
}

// writeHostsFile writes content to fileName (0644) unless it is there.
func writeHostsFile(fileName string, content []byte) error {
	if old, err := os.ReadFile(fileName); err == nil && bytes.Equal(old, content) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(fileName), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(fileName, content, 0o644); err != nil {
		return err
	}
	return os.Chmod(fileName, 0o644) // past the umask
}

// makeHostNetworkHostsMount is a hostNetwork pod's /etc/hosts, as
// upstream's makeHostsMount with useHostNetwork: the node's hosts file
// (nodeHostsFile) under managedHostsHeaderWithHostNetwork, then the pod's
// hostAliases, written to the pod's etc-hosts; nil for a container that
// mounts its own /etc/hosts.
func makeHostNetworkHostsMount(pod *v1.Pod, podDir string, container *v1.Container, nodeHostsFile string) (*kubecontainer.Mount, error) {
	for _, vm := range container.VolumeMounts {
		if p := vm.MountPath; filepath.Clean("/"+p) == etcHostsPath {
			return nil, nil
		}
	}
	node, err := os.ReadFile(nodeHostsFile)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderWithHostNetwork)
	b.Write(node)
	b.Write(hostsEntriesFromHostAliases(pod.Spec.HostAliases))
	hostsFile := getEtcHostsPath(podDir)
	if err := writeHostsFile(hostsFile, b.Bytes()); err != nil {
		return nil, err
	}
	return &kubecontainer.Mount{Name: etcHostsMountName, ContainerPath: etcHostsPath, HostPath: hostsFile}, nil
}

// managedHostsFileContent is the pod's hosts file: localhost's lines, one
// line per pod IP naming the pod (its FQDN first when it has a domain),
// then the pod's hostAliases.
func managedHostsFileContent(podIPs []string, hostName, hostDomain string, hostAliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if hostDomain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostName, hostDomain, hostName)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostName)
		}
	}
	b.Write(hostsEntriesFromHostAliases(hostAliases))
	return b.Bytes()
}

// hostsEntriesFromHostAliases is one line per alias IP, after a comment.
func hostsEntriesFromHostAliases(hostAliases []v1.HostAlias) []byte {
	if len(hostAliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range hostAliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}
