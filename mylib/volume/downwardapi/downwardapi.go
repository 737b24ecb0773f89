// Package downwardapi is the downwardAPI volume plugin
// ("kubernetes.io/downward-api"), upstream's pkg/volume/downwardapi: each
// item becomes a file holding a field of the pod (fieldRef) or a resource
// of one of its containers (resourceFieldRef), formatted as upstream's
// pkg/fieldpath and pkg/api/v1/resource do. The labels and annotations
// files follow the pod: the volume is rewritten on every remount. The files
// belong to the pod's fsGroup (volume.SetVolumeOwnership).
//
// Where it departs from upstream, and why: the field formatting lives
// here instead of in a pkg/fieldpath of its own (the environment variables'
// resolver in mylib/kubelet has its own copy for the env-only fields);
// hugepages resources are not served (the node has none).
package downwardapi

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"mykubelet/mylib/volume"
	"mykubelet/mylib/volume/util"
)

// PluginName is upstream's name for the plugin.
const PluginName = "kubernetes.io/downward-api"

// ProbeVolumePlugins is the plugin list this package contributes.
func ProbeVolumePlugins() []volume.VolumePlugin {
	return []volume.VolumePlugin{&downwardAPIPlugin{}}
}

type downwardAPIPlugin struct{ host volume.VolumeHost }

var _ volume.VolumePlugin = (*downwardAPIPlugin)(nil)

func (p *downwardAPIPlugin) Init(host volume.VolumeHost) error { p.host = host; return nil }
func (p *downwardAPIPlugin) GetPluginName() string             { return PluginName }
func (p *downwardAPIPlugin) CanSupport(spec *volume.Spec) bool {
	return spec.Volume != nil && spec.Volume.DownwardAPI != nil
}

// RequiresRemount: labels and annotations change while the pod runs.
func (p *downwardAPIPlugin) RequiresRemount(*volume.Spec) bool { return true }

func (p *downwardAPIPlugin) NewMounter(spec *volume.Spec, pod *v1.Pod) (volume.Mounter, error) {
	if err := util.CheckVolumeName(spec.Name()); err != nil {
		return nil, err
	}
	return &downwardAPIVolumeMounter{
		host: p.host, pod: pod, volName: spec.Name(), source: *spec.Volume.DownwardAPI,
		dir: p.host.GetPodVolumeDir(pod.UID, PluginName, spec.Name()),
	}, nil
}

func (p *downwardAPIPlugin) NewUnmounter(volName string, podUID types.UID) (volume.Unmounter, error) {
	if err := util.CheckVolumeName(volName); err != nil {
		return nil, err
	}
	return unmounter{dir: p.host.GetPodVolumeDir(podUID, PluginName, volName)}, nil
}

type downwardAPIVolumeMounter struct {
	host    volume.VolumeHost
	pod     *v1.Pod
	volName string
	source  v1.DownwardAPIVolumeSource
	dir     string
}

func (m *downwardAPIVolumeMounter) GetPath() string { return m.dir }

// GetAttributes: read-only for the container, managed by the kubelet.
func (m *downwardAPIVolumeMounter) GetAttributes() volume.Attributes {
	return volume.Attributes{ReadOnly: true, Managed: true}
}

// SetUp writes every item from the pod as the mounter was given it (the
// volume manager hands a fresh pod on each remount).
func (m *downwardAPIVolumeMounter) SetUp(args volume.MounterArgs) error {
	payload, err := CollectData(m.source.Items, m.pod, m.host, m.source.DefaultMode)
	if err != nil {
		return err
	}
	ctx := fmt.Sprintf("pod %s/%s volume %s", m.pod.Namespace, m.pod.Name, m.volName)
	if err := util.WriteVolumeDir(m.dir, ctx, payload); err != nil {
		return err
	}
	return volume.SetVolumeOwnership(m.dir, args.FsGroup, true)
}

type unmounter struct{ dir string }

func (u unmounter) GetPath() string { return u.dir }
func (u unmounter) TearDown() error { return util.RemoveVolumeDir(u.dir) }

// CollectData computes the files of a downward API volume (or of a
// projected volume's downwardAPI source). A file's mode is the item's,
// else defaultMode (nil: 0644, upstream's API default). Errors of all the
// items are joined.
func CollectData(items []v1.DownwardAPIVolumeFile, pod *v1.Pod, host volume.VolumeHost, defaultMode *int32) (map[string]util.FileProjection, error) {
	mode := int32(v1.DownwardAPIVolumeSourceDefaultMode)
	if defaultMode != nil {
		mode = *defaultMode
	}
	data := make(map[string]util.FileProjection, len(items))
	var errs []error
	for _, item := range items {
		f := util.FileProjection{Mode: mode}
		if item.Mode != nil {
			f.Mode = *item.Mode
		}
		switch {
		case item.FieldRef != nil:
			v, err := ExtractFieldPathAsString(pod, item.FieldRef.FieldPath)
			if err != nil {
				klog.ErrorS(err, "Unable to extract field", "fieldPath", item.FieldRef.FieldPath)
				errs = append(errs, err)
				continue
			}
			f.Data = []byte(v)
		case item.ResourceFieldRef != nil:
			alloc, err := host.GetNodeAllocatable()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			v, err := ExtractResourceValueByContainerName(item.ResourceFieldRef, pod, alloc)
			if err != nil {
				klog.ErrorS(err, "Unable to extract field", "resource", item.ResourceFieldRef.Resource)
				errs = append(errs, err)
				continue
			}
			f.Data = []byte(v)
		}
		data[filepath.Clean(item.Path)] = f
	}
	return data, errors.Join(errs...)
}

// ExtractFieldPathAsString is the value of a fieldRef in a volume, as
// upstream's fieldpath.ExtractFieldPathAsString: name, namespace, uid, a
// label or annotation by key (metadata.labels['app']), or all labels or
// annotations as sorted key="value" lines (FormatMap).
func ExtractFieldPathAsString(pod *v1.Pod, fieldPath string) (string, error) {
	if path, key, ok := splitMaybeSubscriptedPath(fieldPath); ok {
		switch path {
		case "metadata.annotations":
			return pod.Annotations[key], nil
		case "metadata.labels":
			return pod.Labels[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support subscript", fieldPath)
	}
	switch fieldPath {
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %v", fieldPath)
}

// splitMaybeSubscriptedPath splits "metadata.labels['k']" into
// "metadata.labels" and "k".
func splitMaybeSubscriptedPath(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return "", "", false
	}
	path, key, ok := strings.Cut(strings.TrimSuffix(fieldPath, "']"), "['")
	return path, key, ok
}

// FormatMap is upstream's: one key="value" line per entry, keys sorted,
// values quoted as Go quotes them, no trailing newline.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("%v=%q", k, m[k])
	}
	return strings.Join(lines, "\n")
}

// ExtractResourceValueByContainerName is a resourceFieldRef's value, as
// upstream's resource.ExtractResourceValueByContainerNameAndNodeAllocatable:
// the named container's limit (the node's allocatable when it sets none)
// or request, divided by the divisor (default 1) and rounded up; cpu in
// millicores before the division, so "1m" divisor gives millicores.
func ExtractResourceValueByContainerName(fs *v1.ResourceFieldSelector, pod *v1.Pod, nodeAllocatable v1.ResourceList) (string, error) {
	if fs.ContainerName == "" {
		return "", fmt.Errorf("resourceFieldRef %s: containerName is required in a volume", fs.Resource)
	}
	c := findContainerInPod(pod, fs.ContainerName)
	if c == nil {
		return "", fmt.Errorf("container %s not found", fs.ContainerName)
	}
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, _ := strings.Cut(fs.Resource, ".")
	rn := v1.ResourceName(name)
	if rn != v1.ResourceCPU && rn != v1.ResourceMemory && rn != v1.ResourceEphemeralStorage {
		return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
	}
	var q resource.Quantity
	switch kind {
	case "limits":
		q = c.Resources.Limits[rn]
		if q.IsZero() {
			q = nodeAllocatable[rn]
		}
	case "requests":
		q = c.Resources.Requests[rn]
	default:
		return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
	}
	if rn == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

func findContainerInPod(pod *v1.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}
