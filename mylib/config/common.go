package config

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"mykubelet/mylib/kubetypes"
)

// maxConfigLength is the largest manifest the file source reads (as upstream: 10 MiB).
const maxConfigLength = 10 << 20

// generatePodName makes a static pod's name unique among nodes: <name>-<node>.
func generatePodName(name, nodeName string) string {
	return name + "-" + strings.ToLower(nodeName)
}

// applyDefaults gives a pod read from a manifest file what the kubelet gives
// every static pod:
//
//   - a UID, when the manifest has none: a hash of the pod, the node name and
//     the file's path, so the same file on the same node always gives the
//     same UID and any edit gives a new one;
//   - the name <name>-<node-name>, the namespace "default" when unset, and
//     spec.nodeName = this node;
//   - the annotation kubernetes.io/config.hash = the UID;
//   - a toleration of every NoExecute taint, so node problems never evict it;
//   - status.phase Pending.
func applyDefaults(pod *v1.Pod, source, nodeName string) error {
	if pod.UID == "" {
		b, err := json.Marshal(pod) // deterministic: struct order, sorted map keys
		if err != nil {
			return fmt.Errorf("hash pod %s: %w", pod.Name, err)
		}
		h := fnv.New128a()
		h.Write(b)
		fmt.Fprintf(h, "host:%s", nodeName)
		fmt.Fprintf(h, "file:%s", source)
		pod.UID = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	pod.Name = generatePodName(pod.Name, nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[kubetypes.ConfigHashAnnotationKey] = string(pod.UID)
	addOrUpdateToleration(pod, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	pod.Status.Phase = v1.PodPending
	return nil
}

// addOrUpdateToleration adds t unless the pod already tolerates exactly that.
func addOrUpdateToleration(pod *v1.Pod, t v1.Toleration) {
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].MatchToleration(&t) {
			pod.Spec.Tolerations[i] = t
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, t)
}

// decodeSinglePod turns YAML or JSON into a Pod, applies the static-pod
// defaults and checks the result. A file holds one pod: of a YAML file
// with several documents only the first is used, as upstream, and a log
// line says so (upstream is silent).
func decodeSinglePod(data []byte, source, nodeName string) (*v1.Pod, error) {
	if n := extraDocuments(data); n > 0 {
		klog.InfoS("Static pod manifest holds more than one YAML document; only the first is used, one pod per file", "path", source, "ignoredDocuments", n)
	}
	js, err := utilyaml.ToJSON(data) // JSON is YAML too; only the first document
	if err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	obj, err := runtime.Decode(scheme.Codecs.UniversalDeserializer(), js)
	if err != nil {
		return nil, fmt.Errorf("couldn't parse as a pod: %w", err)
	}
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, fmt.Errorf("couldn't parse as a pod: it is a %s", obj.GetObjectKind().GroupVersionKind().Kind)
	}
	if pod.Name == "" {
		return nil, errors.New("invalid pod: metadata.name is required")
	}
	if err := applyDefaults(pod, source, nodeName); err != nil {
		return nil, err
	}
	if err := validateStaticPod(pod); err != nil {
		return nil, fmt.Errorf("invalid pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return pod, nil
}

// extraDocuments counts the YAML documents after the first that hold more
// than comments.
func extraDocuments(data []byte) int {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	n := 0
	for {
		doc, err := r.Read()
		if err != nil { // io.EOF, or a line too long: ToJSON reports what matters
			break
		}
		if !emptyDocument(doc) {
			n++
		}
	}
	return max(n-1, 0)
}

// emptyDocument: only blank lines, comments and document markers.
func emptyDocument(doc []byte) bool {
	for line := range bytes.Lines(doc) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) && !bytes.Equal(line, []byte("...")) {
			return false
		}
	}
	return true
}

// validateStaticPod is a small part of the API server's pod validation,
// enough to refuse the mistakes a learner makes, plus the rule that static
// pods may not reference API objects (the node may not read them for a pod
// the API server never scheduled).
func validateStaticPod(pod *v1.Pod) error {
	var errs []string
	// The UID names the pod's directories (upstream: /var/lib/kubelet/pods/<uid>)
	// and log files: "../../../etc/passwd" must never get that far. UUIDs
	// and the hashes applyDefaults makes are RFC 1123 labels.
	if e := validation.IsDNS1123Label(string(pod.UID)); len(e) > 0 {
		errs = append(errs, fmt.Sprintf("metadata.uid %q: %s (use a UUID, or leave it out and the kubelet derives one)", pod.UID, strings.Join(e, "; ")))
	}
	if e := validation.IsDNS1123Subdomain(pod.Name); len(e) > 0 {
		errs = append(errs, fmt.Sprintf("metadata.name %q: %s", pod.Name, strings.Join(e, "; ")))
	}
	if e := validation.IsDNS1123Label(pod.Namespace); len(e) > 0 {
		errs = append(errs, fmt.Sprintf("metadata.namespace %q: %s", pod.Namespace, strings.Join(e, "; ")))
	}
	if len(pod.Spec.Containers) == 0 {
		errs = append(errs, "spec.containers: at least one container is required")
	}
	names := map[string]bool{}
	for i, c := range pod.Spec.Containers {
		if e := validation.IsDNS1123Label(c.Name); len(e) > 0 {
			errs = append(errs, fmt.Sprintf("spec.containers[%d].name %q: %s", i, c.Name, strings.Join(e, "; ")))
		}
		if names[c.Name] {
			errs = append(errs, fmt.Sprintf("spec.containers[%d].name %q: duplicate", i, c.Name))
		}
		names[c.Name] = true
		if strings.TrimSpace(c.Image) == "" {
			errs = append(errs, fmt.Sprintf("spec.containers[%d].image: required", i))
		}
	}
	if r := apiObjectReference(pod); r != "" {
		errs = append(errs, "static pods may not reference "+r)
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, ", "))
	}
	return nil
}

// apiObjectReference names the first kind of API object the pod refers to.
func apiObjectReference(pod *v1.Pod) string {
	if pod.Spec.ServiceAccountName != "" {
		return "serviceaccounts"
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			return "secrets"
		case v.ConfigMap != nil:
			return "configmaps"
		case v.PersistentVolumeClaim != nil:
			return "persistentvolumeclaims"
		case v.Projected != nil:
			return "projected volumes"
		}
	}
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				return "secrets"
			}
			if e.ConfigMapRef != nil {
				return "configmaps"
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return "secrets"
			}
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				return "configmaps"
			}
		}
	}
	return ""
}
