package docscheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sentences the library held once its prober, log manager and
// SetDefaults existed: each must be found.
const staleSrc = `// Package status is the status manager.
//
// Where it departs from upstream, and why (one line each):
//   - no probe results, resize status or pod-startup metrics: there is no
//     prober or resize yet;
package status

// readiness and startup without probes: a running container is ready
// and started (there is no prober yet);

// an httpGet hook fails with
// errHTTPHookUnsupported (this kubelet has no HTTP prober client yet);

// Departs from upstream: only the reasons the pod half of this kubelet uses
// are here (no volume, eviction or probe reasons yet).

// a container's log file is removed with it, but there are no rotated
// logs or legacy /var/log/containers symlinks to clean

// Relative paths are made absolute. No defaults yet.
`

// The sentences that replaced them, and sentences about pods rather than
// the kubelet's parts: none may be found while there is no eviction
// manager.
const trueSrc = `// Package status is the status manager.
//
//   - no SetContainerReadiness or SetContainerStartup: a probe result
//     reaches the status through the pod sync it triggers;
//   - the DisruptionTarget condition is not merged: this kubelet has no
//     eviction manager;
package status

// A container with no probes is ready once it runs; a pod with no
// readiness gates yet is ready when its containers are.

// image pulls have no back-off. The pod has not started yet.

// No defaults are set here: SetDefaults does that.
`

var everyPart = func(Subsystem) bool { return true }

func TestStaleAbsencesFindsEachSentence(t *testing.T) {
	found, err := StaleAbsences("x.go", []byte(staleSrc), Subsystems, everyPart)
	require.NoError(t, err)
	joined := strings.Join(found, "\n")
	for _, want := range []string{
		`x.go:4:1: "no probe results, resize status or pod-startup metrics: there is no prober or resize yet"`,
		`x.go:9:1: "no prober yet"`,
		`x.go:12:1: "no HTTP prober client yet"`,
		`x.go:15:1: "no volume, eviction or probe reasons yet" (mylib/prober exists)`,
		`x.go:17:1: "there are no rotated logs"`,
		`x.go:20:1: "No defaults yet"`,
	} {
		assert.Contains(t, joined, want)
	}
}

func TestStaleAbsencesLeavesTrueSentences(t *testing.T) {
	noEviction := func(s Subsystem) bool { return s.Dir != "mylib/eviction" }
	found, err := StaleAbsences("x.go", []byte(trueSrc), Subsystems, noEviction)
	require.NoError(t, err)
	assert.Empty(t, found)
}

// A part that does not exist may be said to be missing: the eviction
// manager here, while the prober exists.
func TestStaleAbsencesOnlyForPartsThatExist(t *testing.T) {
	src := []byte("// Package p: this kubelet has no eviction manager yet; there is no prober yet.\npackage p\n")
	found, err := StaleAbsences("p.go", src, Subsystems, func(s Subsystem) bool { return s.Dir == "mylib/prober" })
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Contains(t, found[0], `"no prober yet" (mylib/prober exists)`)
}

func TestSubsystemExists(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "mylib", "gc")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	gc := Subsystem{Dir: "mylib/gc", Ident: "ContainerGC"}
	assert.False(t, SubsystemExists(root, Subsystem{Dir: "mylib/gc"}), "no Go file yet")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gc_test.go"), []byte("package gc\n"), 0o644))
	assert.False(t, SubsystemExists(root, Subsystem{Dir: "mylib/gc"}), "a test file is not a package")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gc.go"), []byte("package gc\n"), 0o644))
	assert.True(t, SubsystemExists(root, Subsystem{Dir: "mylib/gc"}))
	assert.False(t, SubsystemExists(root, gc), "the package does not declare ContainerGC")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gc.go"), []byte("package gc\n\ntype ContainerGC struct{}\n"), 0o644))
	assert.True(t, SubsystemExists(root, gc))
}

func TestPackageDocsCountsDocCommentsOnly(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	write("a.go", "// Package p does a.\npackage p\n")
	write("b.go", "// A file comment, not the package's.\n\npackage p\n")
	write("a_test.go", "// Package p tests.\npackage p\n")
	docs, err := PackageDocs(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.go"}, docs)
	write("b.go", "// Package p also does b.\npackage p\n")
	docs, err = PackageDocs(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.go", "b.go"}, docs)
}

// The sentences the library held before the volume manager, the pod DNS
// configurer and the downward API plugin: each is found once its part
// exists, and none while it does not.
func TestStaleAbsencesOfTheVolumeParts(t *testing.T) {
	src := []byte(`// Package p.
//   - no volumes or mounts: this kubelet has no volume manager;
package p

// GetPodDNS leaves DNS to the runtime: this kubelet has no cluster DNS
// configuration.

// A pod's labels reach no file: there is no downward API yet.
`)
	parts := map[string]bool{"mylib/volumemanager": true, "mylib/network/dns": true, "mylib/volume/downwardapi": true}
	found, err := StaleAbsences("p.go", src, Subsystems, func(s Subsystem) bool { return parts[s.Dir] })
	require.NoError(t, err)
	all := strings.Join(found, "\n")
	for dir := range parts {
		assert.Contains(t, all, "("+dir+" exists)")
	}
	found, err = StaleAbsences("p.go", src, Subsystems, func(s Subsystem) bool { return !parts[s.Dir] })
	require.NoError(t, err)
	assert.Empty(t, found)
}

// The sentences the library held before the stats provider, the resource
// metrics and the kubelet's series: each is found once its part exists,
// and none while it does not.
func TestStaleAbsencesOfTheStatsParts(t *testing.T) {
	src := []byte(`// Package p.
//   - no resize status or pod-startup metrics: this kubelet has no
//     in-place resize and no metrics;
package p

// The server answers 404 on /stats/summary: there is no stats provider yet.

// metrics-server gets nothing: this kubelet has no /metrics/resource.

// A stuck sync loop goes unseen: there are no health checks yet.
`)
	parts := map[string]bool{"mylib/metrics": true, "mylib/stats": true, "mylib/metrics/collectors": true, "mylib/kubelet": true}
	found, err := StaleAbsences("p.go", src, Subsystems, func(s Subsystem) bool { return parts[s.Dir] })
	require.NoError(t, err)
	all := strings.Join(found, "\n")
	for dir := range parts {
		assert.Contains(t, all, "("+dir, "a sentence says %s is missing", dir)
	}
	found, err = StaleAbsences("p.go", src, Subsystems, func(s Subsystem) bool { return !parts[s.Dir] })
	require.NoError(t, err)
	assert.Empty(t, found)
}
