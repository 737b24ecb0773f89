package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheReportCountsWhatRanAndGroupsWhatFailedByKind(t *testing.T) {
	var out bytes.Buffer
	code, err := run([]string{"report", "--label", "capstone", "testdata/capstone.json"}, &out)
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	got := out.String()
	// 5 run (the skipped [Serial] spec and the passing suite set-up are
	// not), 3 of them passed.
	assert.Contains(t, got, "capstone: 3 passed of 5 run (60%): 1 failed, 1 timed out; 1 skipped; 1m23s\n")
	assert.Contains(t, got, "\nsecurity context (1):\n  - [sig-node] Security Context When creating a container with runAsUser should run the container with uid 65534 [LinuxOnly] [NodeConformance] [Conformance]\n      security_context.go:123: expected \"65534\" in the log\n")
	assert.Contains(t, got, "\nprobes and hooks (1):\n  - [sig-node] Probing container with readiness probe should not be ready before initial delay and never restart [NodeConformance] [Conformance] [timedout]\n")
	assert.NotContains(t, got, "full log", "only a failure's first line")
	assert.NotContains(t, got, "sysctls (", "a kind with no failure is not listed")
}

func TestCompareCountsOnlyWhatTheOtherKubeletPassed(t *testing.T) {
	var out bytes.Buffer
	code, err := run([]string{"report", "--compare", "testdata/upstream.json", "--goal", "95", "testdata/capstone.json"}, &out)
	// Upstream passed 5; of them we passed 3 (the security context spec
	// failed, the Downward API one did not run here). The probe spec upstream
	// failed is not counted against us.
	require.Error(t, err)
	assert.Equal(t, 1, code)
	assert.Contains(t, err.Error(), "60.0% of the specs upstream's kubelet passed, below the goal of 95%")
	got := out.String()
	assert.Contains(t, got, "of the 5 specs upstream's kubelet passed, this kubelet passed 3 (60.0%)\n")
	assert.Contains(t, got, "  - [sig-node] Downward API should provide host IP as an env var [NodeConformance] [Conformance] [not run here]\n")
	assert.Contains(t, got, "uid 65534 [LinuxOnly] [NodeConformance] [Conformance] [failed]\n")
	assert.NotContains(t, got, "readiness probe should not be ready before initial delay and never restart [NodeConformance] [Conformance] [timedout]\n  -")

	code, err = run([]string{"report", "--compare", "testdata/upstream.json", "--goal", "60", "testdata/capstone.json"}, &bytes.Buffer{})
	assert.NoError(t, err)
	assert.Equal(t, 0, code)
}

func TestAFailedSuiteSetUpIsASpecThatFailed(t *testing.T) {
	dir := t.TempDir()
	report := `[{"SuiteDescription":"e2e","RunTime":1000000000,"SpecReports":[
	  {"LeafNodeType":"SynchronizedBeforeSuite","State":"failed","Failure":{"Message":"no node is Ready","Location":{"FileName":"e2e.go","LineNumber":9}}}]}]`
	path := filepath.Join(dir, "r.json")
	require.NoError(t, os.WriteFile(path, []byte(report), 0o600))
	var out bytes.Buffer
	_, err := run([]string{"report", path}, &out)
	require.NoError(t, err)
	assert.Contains(t, out.String(), "this kubelet: 0 passed of 1 run (0%): 1 failed")
	assert.Contains(t, out.String(), "  - SynchronizedBeforeSuite\n      e2e.go:9: no node is Ready\n")
}

func TestBadInputIsOneLineAndExit2(t *testing.T) {
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "r.json")
	require.NoError(t, os.WriteFile(notJSON, []byte("<html>"), 0o600))
	empty := filepath.Join(dir, "empty.json")
	require.NoError(t, os.WriteFile(empty, []byte("[]"), 0o600))
	for _, args := range [][]string{
		nil,
		{"summary", "x.json"},
		{"report"},
		{"report", "--goal", "95", "testdata/capstone.json"},
		{"report", "--goal", "120", "--compare", "testdata/upstream.json", "testdata/capstone.json"},
		{"report", "--nope", "testdata/capstone.json"},
		{"report", filepath.Join(dir, "missing.json")},
		{"report", notJSON},
		{"report", empty},
	} {
		code, err := run(args, &bytes.Buffer{})
		if assert.Error(t, err, "%q", args) {
			assert.Equal(t, 2, code, "%q", args)
			assert.NotContains(t, err.Error(), "\n", "%q: one line", args)
		}
	}
}

func TestKinds(t *testing.T) {
	for text, want := range map[string]string{
		"[sig-node] Security Context When creating a pod with readOnlyRootFilesystem should run the container with readonly rootfs when readOnlyRootFilesystem=true": "security context",
		"[sig-node] Sysctls [LinuxOnly] [NodeConformance] should not launch unsafe, but not explicitly enabled sysctls on the node":                                  "sysctls",
		"[sig-node] PodOSRejection [NodeConformance] Kubelet should reject pod when the node OS doesn't match pod's OS":                                              "admission",
		"[sig-node] KubeletManagedEtcHosts should test kubelet managed /etc/hosts file":                                                                              "/etc/hosts and hostname",
		"[sig-node] Container Lifecycle Hook when create a pod with lifecycle hook should execute prestop http hook properly":                                        "probes and hooks",
		"[sig-node] ConfigMap should be consumable via environment variable":                                                                                         "environment and downward API",
		"[sig-storage] EmptyDir volumes pod should support memory backed volumes of specified size":                                                                  "volumes",
		"[sig-node] Containers should be able to override the image's default command (container entrypoint)":                                                        "containers and pods",
		"[sig-node] Lease lease API should be available":                                                                                                             "other",
	} {
		assert.Equal(t, want, kindOf(text), text)
	}
	assert.True(t, strings.HasPrefix(firstLine(strings.Repeat("x", 300)), strings.Repeat("x", 200)))
	assert.Len(t, []rune(firstLine(strings.Repeat("x", 300))), 201)
}
