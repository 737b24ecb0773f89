package kubeletconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/yaml"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Kind and APIVersion a --config file must have.
const (
	Kind       = "KubeletConfiguration"
	APIVersion = "kubelet.config.k8s.io/v1beta1"
)

// Supported are the fields (JSON paths) of a KubeletConfiguration this
// Kubelet implements; any other field in a file is refused.
var Supported = []string{
	"address", "port",
	"staticPodPath", "syncFrequency", "fileCheckFrequency",
	"nodeStatusUpdateFrequency", "nodeStatusReportFrequency", "nodeLeaseDurationSeconds",
	"kubeAPIQPS", "kubeAPIBurst", "eventRecordQPS", "eventBurst",
	"maxPods", "nodeStatusMaxImages", "rotateCertificates", "serverTLSBootstrap", "containerRuntimeEndpoint",
	"containerLogMaxSize", "containerLogMaxFiles", "containerLogMaxWorkers", "containerLogMonitorInterval",
	"authentication.x509.clientCAFile",
	"authentication.webhook.enabled", "authentication.webhook.cacheTTL",
	"authentication.anonymous.enabled",
	"authorization.mode",
	"authorization.webhook.cacheAuthorizedTTL", "authorization.webhook.cacheUnauthorizedTTL",
	// Node pressure: the eviction manager, the image GC manager, the pulls.
	"evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionMinimumReclaim",
	"evictionPressureTransitionPeriod", "evictionMaxPodGracePeriod",
	"imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "imageMinimumGCAge", "imageMaximumGCAge",
	"serializeImagePulls", "maxParallelImagePulls", "registryPullQPS", "registryBurst",
	// The pods' DNS: the cluster's DNS Service address and domain, written
	// into each ClusterFirst pod's resolv.conf (none: upstream's
	// MissingClusterDNS warning, and the node's resolver instead).
	"clusterDNS", "clusterDomain",
	// The container manager (mylib/cm): kubepods, the QoS cgroups and the
	// pods' cgroups, with the cgroupfs driver only.
	"cgroupsPerQOS", "cgroupRoot", "cgroupDriver", "enforceNodeAllocatable",
	// The unsafe sysctls pods may set besides the safe ones (mylib/sysctl).
	"allowedUnsafeSysctls",
}

var codecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	if err := kubeletv1beta1.AddToScheme(scheme); err != nil {
		panic(err) // the published types always register
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict)
}()

// Load reads path, a KubeletConfiguration, strictly: the kind and
// apiVersion must be ours; an unknown field, a repeated one, or one not in
// Supported is an error naming it and the file. Relative paths are made
// absolute against the file's directory, as upstream. No defaults are set
// here: SetDefaults does that (Flags.KubeletConfiguration calls it).
func Load(path string) (*kubeletv1beta1.KubeletConfiguration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	kc, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("kubelet config %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&kc.StaticPodPath, &kc.Authentication.X509.ClientCAFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return kc, nil
}

// Decode is Load without a file.
func Decode(data []byte) (*kubeletv1beta1.KubeletConfiguration, error) {
	js, err := yaml.ToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	var fields map[string]any
	if err := json.Unmarshal(js, &fields); err != nil || fields == nil {
		return nil, errors.New("not a KubeletConfiguration (want an object with kind and apiVersion)")
	}
	if fields["kind"] != Kind || fields["apiVersion"] != APIVersion {
		return nil, fmt.Errorf("kind %v, apiVersion %v: want kind %s, apiVersion %s", fields["kind"], fields["apiVersion"], Kind, APIVersion)
	}
	obj, _, err := codecs.UniversalDecoder(kubeletv1beta1.SchemeGroupVersion).Decode(data, nil, nil) // YAML strictly: no repeated keys
	if err != nil {
		return nil, err // e.g. strict decoding error: unknown field "maxpods"
	}
	kc, ok := obj.(*kubeletv1beta1.KubeletConfiguration)
	if !ok {
		return nil, fmt.Errorf("decoded a %T, not a KubeletConfiguration", obj)
	}
	if bad := unsupported(fields, ""); len(bad) > 0 {
		return nil, fmt.Errorf("field %s is not supported by this kubelet (supported: %s)", strings.Join(bad, ", field "), strings.Join(Supported, ", "))
	}
	return kc, nil
}

// unsupported lists the set fields, as JSON paths, that Supported does not
// name (nor names a field under).
func unsupported(fields map[string]any, prefix string) []string {
	var bad []string
	for name, v := range fields {
		path := prefix + name
		if prefix == "" && (name == "kind" || name == "apiVersion") {
			continue
		}
		if slices.Contains(Supported, path) {
			continue
		}
		if sub, ok := v.(map[string]any); ok && slices.ContainsFunc(Supported, func(s string) bool { return strings.HasPrefix(s, path+".") }) {
			bad = append(bad, unsupported(sub, path+".")...)
			continue
		}
		bad = append(bad, path)
	}
	sort.Strings(bad)
	return bad
}
