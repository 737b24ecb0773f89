package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"mykubelet/mylib/kubetypes"
)

// captureLogs sends klog's output to a buffer until the test ends.
func captureLogs(t *testing.T) func() string {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	klog.SetLogger(logger)
	t.Cleanup(klog.ClearLogger)
	buf := logger.GetSink().(ktesting.Underlier).GetBuffer()
	return buf.String
}

func TestManifestWithAPathAsUIDIsRefused(t *testing.T) {
	logs := captureLogs(t)
	dir := t.TempDir()
	writeFile(t, dir, "evil.yaml", strings.Replace(webYAML, "  name: web\n", "  name: web\n  uid: ../../../etc/passwd\n", 1))
	writeFile(t, dir, "good.yaml", sleeperJSON)
	s, _ := newTestSource(dir)

	pods := s.listConfig()
	require.Len(t, pods, 1, "the other manifest still counts")
	assert.Equal(t, "sleeper-node-1", pods[0].Name)
	assert.Contains(t, logs(), "ERROR Could not process manifest file, skipping it")
	assert.Contains(t, logs(), `evil.yaml: invalid pod default/web-node-1: metadata.uid \"../../../etc/passwd\": a lowercase RFC 1123 label must consist of`)

	// A UUID, as the API server makes, is fine.
	pod, err := decodeSinglePod([]byte(strings.Replace(webYAML, "  name: web\n", "  name: web\n  uid: 59367ef6-1bb2-4057-ba10-e71328a2c94e\n", 1)), "/m/web.yaml", "n1")
	require.NoError(t, err)
	assert.EqualValues(t, "59367ef6-1bb2-4057-ba10-e71328a2c94e", pod.UID)
}

func TestMultiDocumentManifestUsesTheFirstAndSaysSo(t *testing.T) {
	logs := captureLogs(t)
	second := strings.Replace(webYAML, "name: web", "name: other", 2)
	pod, err := decodeSinglePod([]byte("# two pods\n---\n"+webYAML+"---\n"+second+"---\n# nothing\n"), "/m/two.yaml", "n1")
	require.NoError(t, err)
	assert.Equal(t, "web-n1", pod.Name)
	assert.Contains(t, logs(), `INFO Static pod manifest holds more than one YAML document; only the first is used, one pod per file path="/m/two.yaml" ignoredDocuments=1`)

	// One document, with markers and comments around it: nothing to say.
	before := logs()
	_, err = decodeSinglePod([]byte("---\n"+webYAML+"...\n---\n# end\n"), "/m/one.yaml", "n1")
	require.NoError(t, err)
	assert.Equal(t, before, logs())
}

// FuzzDecodeSinglePod feeds the manifest decoder anything: it must never
// panic, and whatever it accepts must be a pod the kubelet can run safely.
// The seeds in testdata/fuzz/FuzzDecodeSinglePod run with every go test;
// to search further: go test -fuzz FuzzDecodeSinglePod ./mylib/config
func FuzzDecodeSinglePod(f *testing.F) {
	f.Add([]byte(webYAML))
	f.Add([]byte(sleeperJSON))
	f.Fuzz(func(t *testing.T, data []byte) {
		pod, err := decodeSinglePod(data, "/etc/kubernetes/manifests/fuzz.yaml", "node-1")
		if err != nil {
			if pod != nil {
				t.Fatalf("a pod with an error: %v", err)
			}
			return
		}
		if !strings.HasSuffix(pod.Name, "-node-1") || pod.Spec.NodeName != "node-1" {
			t.Fatalf("static pod defaults missing: name %q, nodeName %q", pod.Name, pod.Spec.NodeName)
		}
		if e := validation.IsDNS1123Label(string(pod.UID)); len(e) > 0 {
			t.Fatalf("accepted UID %q: %v", pod.UID, e)
		}
		if pod.Annotations[kubetypes.ConfigHashAnnotationKey] != string(pod.UID) {
			t.Fatalf("config hash %q is not the UID %q", pod.Annotations[kubetypes.ConfigHashAnnotationKey], pod.UID)
		}
		if len(pod.Spec.Containers) == 0 || apiObjectReference(pod) != "" {
			t.Fatalf("accepted a pod without containers or with an API object reference")
		}
	})
}
