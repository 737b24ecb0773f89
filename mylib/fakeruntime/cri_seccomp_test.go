package fakeruntime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestALocalhostSeccompProfileIsLoadedAsContainerdLoadsIt: a container
// whose Localhost profile is missing from the node, or is not JSON, is not
// created, with containerd's words (the kubelet shows them in
// CreateContainerError); one whose profile is there, a RuntimeDefault or
// Unconfined one, and a privileged one (which runs with none) are.
func TestALocalhostSeccompProfileIsLoadedAsContainerdLoadsIt(t *testing.T) {
	r, _ := fixture(t)
	sb := runSandbox(t, r, "web", "uid-1", nil)
	dir := t.TempDir()
	good, bad, missing := filepath.Join(dir, "audit.json"), filepath.Join(dir, "bad.json"), filepath.Join(dir, "missing.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"defaultAction": "SCMP_ACT_LOG"}`), 0o644))
	require.NoError(t, os.WriteFile(bad, []byte(`defaultAction: SCMP_ACT_LOG`), 0o644))
	create := func(name string, sc *runtimeapi.LinuxContainerSecurityContext) error {
		_, err := r.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Command: []string{"true"}, Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: sc}}})
		return err
	}
	localhost := func(ref string) *runtimeapi.SecurityProfile {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}

	err := create("missing", &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(missing)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `failed to generate seccomp spec opts: cannot load seccomp profile "`+missing+`": open `+missing+`: no such file or directory`)
	err = create("bad", &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost(bad)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `decoding seccomp profile failed "`+bad+`"`)
	err = create("relative", &runtimeapi.LinuxContainerSecurityContext{Seccomp: localhost("profiles/audit.json")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "must be absolute")

	for name, sc := range map[string]*runtimeapi.LinuxContainerSecurityContext{
		"good":       {Seccomp: localhost(good)},
		"default":    {Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
		"unconfined": {Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}},
		"none":       nil,
		"privileged": {Privileged: true, Seccomp: localhost(missing)},
	} {
		assert.NoError(t, create(name, sc), name)
	}
}
