package kuberuntime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"google.golang.org/grpc"
)

// imageUser is an image service whose every image runs as uid or
// username, counting its ImageStatus calls.
type imageUser struct {
	runtimeapi.ImageServiceClient // nil: only ImageStatus is called
	uid                           *int64
	username                      string
	calls                         int
}

func (s *imageUser) ImageStatus(_ context.Context, r *runtimeapi.ImageStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error) {
	s.calls++
	img := &runtimeapi.Image{Id: r.GetImage().GetImage(), Username: s.username}
	if s.uid != nil {
		img.Uid = &runtimeapi.Int64Value{Value: *s.uid}
	}
	return &runtimeapi.ImageStatusResponse{Image: img}, nil
}

func securityContextConfig(t *testing.T, images *imageUser, pod *v1.Pod) (*runtimeapi.LinuxContainerSecurityContext, error) {
	t.Helper()
	m := &Manager{helper: literalHelper{}, podLogsDirectory: t.TempDir(), is: images}
	cfg, err := m.generateContainerConfig(context.Background(), &pod.Spec.Containers[0], pod, 0, "10.88.0.2", "sha256:abc", nil, nil)
	if err != nil {
		return nil, err
	}
	return cfg.GetLinux().GetSecurityContext(), nil
}

// The container's fields reach the CRI config, over the pod's; the
// pod's fill in what the container leaves out (upstream's
// DetermineEffectiveSecurityContext).
func TestContainerSecurityContextMergedOverThePods(t *testing.T) {
	pod := webPod()
	pod.Spec.SecurityContext = &v1.PodSecurityContext{
		RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), RunAsNonRoot: ptr.To(true),
		FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{4000, 5000},
		SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c1,c2"},
	}
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{
		RunAsUser:                ptr.To[int64](1001),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}},
	}
	images := &imageUser{uid: ptr.To[int64](0)}
	sc, err := securityContextConfig(t, images, pod)
	require.NoError(t, err)
	assert.Equal(t, int64(1001), sc.GetRunAsUser().GetValue(), "the container's runAsUser wins")
	assert.Equal(t, int64(3000), sc.GetRunAsGroup().GetValue(), "the pod's runAsGroup")
	assert.True(t, sc.ReadonlyRootfs)
	assert.True(t, sc.NoNewPrivs, "allowPrivilegeEscalation: false")
	assert.False(t, sc.Privileged)
	assert.Equal(t, &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"ALL"}}, sc.Capabilities)
	assert.Equal(t, []int64{2000, 4000, 5000}, sc.SupplementalGroups, "fsGroup, then supplementalGroups")
	assert.Equal(t, "s0:c1,c2", sc.GetSelinuxOptions().GetLevel())
	assert.Equal(t, runtimeapi.SecurityProfile_Unconfined, sc.GetSeccomp().GetProfileType(), "no seccomp asked: unconfined (seccompDefault off)")
	assert.Nil(t, sc.Apparmor, "no AppArmor asked: the runtime's default")
	assert.Equal(t, runtimeapi.NamespaceMode_POD, sc.GetNamespaceOptions().GetNetwork())
	assert.Zero(t, images.calls, "runAsUser given: the image's user is not asked")
}

func TestContainerSecurityContextDefaults(t *testing.T) {
	images := &imageUser{uid: ptr.To[int64](0)}
	sc, err := securityContextConfig(t, images, webPod())
	require.NoError(t, err)
	assert.Nil(t, sc.RunAsUser, "the runtime runs the image's user")
	assert.False(t, sc.NoNewPrivs, "allowPrivilegeEscalation unset: no NoNewPrivs")
	assert.False(t, sc.ReadonlyRootfs)
	assert.Empty(t, sc.SupplementalGroups)
	assert.Equal(t, runtimeapi.SecurityProfile_Unconfined, sc.GetSeccomp().GetProfileType())

	// allowPrivilegeEscalation true, privileged.
	pod := webPod()
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true), Privileged: ptr.To(true)}
	sc, err = securityContextConfig(t, images, pod)
	require.NoError(t, err)
	assert.False(t, sc.NoNewPrivs)
	assert.True(t, sc.Privileged)
}

// runAsGroup alone: the image's user is filled in, since CRI runtimes
// refuse a group without a user.
func TestRunAsGroupWithoutUserTakesTheImagesUser(t *testing.T) {
	pod := webPod()
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{RunAsGroup: ptr.To[int64](3000)}
	sc, err := securityContextConfig(t, &imageUser{uid: ptr.To[int64](65534)}, pod)
	require.NoError(t, err)
	assert.Equal(t, int64(65534), sc.GetRunAsUser().GetValue())
	assert.Equal(t, int64(3000), sc.GetRunAsGroup().GetValue())

	sc, err = securityContextConfig(t, &imageUser{username: "nobody"}, pod)
	require.NoError(t, err)
	assert.Nil(t, sc.RunAsUser)
	assert.Equal(t, "nobody", sc.RunAsUsername)
}

// runAsNonRoot is checked against runAsUser, else the image's user, with
// upstream's messages; the error makes the start a
// CreateContainerConfigError (startContainer).
func TestVerifyRunAsNonRoot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		podSC   *v1.PodSecurityContext
		sc      *v1.SecurityContext
		images  *imageUser
		wantErr string
	}{
		{name: "image root", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, images: &imageUser{uid: ptr.To[int64](0)},
			wantErr: `container has runAsNonRoot and image will run as root (pod: "web_default(uid-web)", container: app)`},
		{name: "image without user is root", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, images: &imageUser{},
			wantErr: "container has runAsNonRoot and image will run as root"},
		{name: "image user name", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, images: &imageUser{username: "app"},
			wantErr: "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root"},
		{name: "runAsUser 0", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, sc: &v1.SecurityContext{RunAsUser: ptr.To[int64](0)},
			images: &imageUser{uid: ptr.To[int64](1000)}, wantErr: "container's runAsUser breaks non-root policy"},
		{name: "image non-root", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, images: &imageUser{uid: ptr.To[int64](1000)}},
		{name: "runAsUser non-root over a root image", sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)},
			images: &imageUser{uid: ptr.To[int64](0)}},
		{name: "container allows root over the pod", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			sc: &v1.SecurityContext{RunAsNonRoot: ptr.To(false)}, images: &imageUser{uid: ptr.To[int64](0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := webPod()
			pod.Spec.SecurityContext = tc.podSC
			pod.Spec.Containers[0].SecurityContext = tc.sc
			sc, err := securityContextConfig(t, tc.images, pod)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			if tc.images.uid != nil && *tc.images.uid != 0 && (tc.sc == nil || tc.sc.RunAsUser == nil) {
				assert.Equal(t, *tc.images.uid, sc.GetRunAsUser().GetValue(), "the image's uid, checked, is the one asked for")
			}
		})
	}
}

func TestSeccompAndAppArmorProfiles(t *testing.T) {
	rd := &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}
	for _, tc := range []struct {
		name        string
		change      func(*v1.Pod)
		seccomp     *runtimeapi.SecurityProfile
		apparmor    *runtimeapi.SecurityProfile
		apparmorOld string
	}{
		{name: "pod RuntimeDefault", change: func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: rd} },
			seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
		{name: "container Unconfined over pod RuntimeDefault", change: func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: rd}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}
		}, seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}},
		{name: "Localhost", change: func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("audit.json")}}
		}, seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: DefaultSeccompProfileRoot + "/audit.json"}},
		{name: "AppArmor field", change: func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
		}, seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
			apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, apparmorOld: "runtime/default"},
		{name: "AppArmor annotation", change: func(p *v1.Pod) {
			p.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": "localhost/k8s-deny-write"}
		}, seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
			apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-deny-write"}, apparmorOld: "localhost/k8s-deny-write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := webPod()
			tc.change(pod)
			sc, err := securityContextConfig(t, &imageUser{}, pod)
			require.NoError(t, err)
			assert.Equal(t, tc.seccomp, sc.Seccomp)
			assert.Equal(t, tc.apparmor, sc.Apparmor)
			assert.Equal(t, tc.apparmorOld, sc.ApparmorProfile)
		})
	}
	pod := webPod()
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}
	_, err := securityContextConfig(t, &imageUser{}, pod)
	assert.EqualError(t, err, "localhostProfile must be set if seccompProfile type is Localhost")
}

// The sandbox is privileged when a container is (containerd refuses a
// privileged container in an unprivileged sandbox), runs the pause
// container under RuntimeDefault seccomp, and carries the pod's user and
// groups.
func TestSandboxSecurityContext(t *testing.T) {
	m := &Manager{helper: literalHelper{}, podLogsDirectory: t.TempDir()}
	pod := webPod()
	cfg, err := m.generatePodSandboxConfig(pod, 0)
	require.NoError(t, err)
	sc := cfg.GetLinux().GetSecurityContext()
	assert.False(t, sc.Privileged)
	assert.Equal(t, runtimeapi.SecurityProfile_RuntimeDefault, sc.GetSeccomp().GetProfileType())

	pod.Spec.InitContainers = []v1.Container{{Name: "setup", SecurityContext: &v1.SecurityContext{Privileged: ptr.To(true)}}}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000),
		FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{4000}}
	cfg, err = m.generatePodSandboxConfig(pod, 0)
	require.NoError(t, err)
	sc = cfg.GetLinux().GetSecurityContext()
	assert.True(t, sc.Privileged)
	assert.Equal(t, int64(1000), sc.GetRunAsUser().GetValue())
	assert.Equal(t, int64(3000), sc.GetRunAsGroup().GetValue())
	assert.Equal(t, []int64{2000, 4000}, sc.SupplementalGroups)
}

// The pod's sysctls reach the sandbox with dots: runc refuses
// kernel/shm_rmid_forced ("sysctl is not in a separate kernel namespace").
func TestSandboxSysctlsWithDots(t *testing.T) {
	m := &Manager{helper: literalHelper{}, podLogsDirectory: t.TempDir()}
	pod := webPod()
	pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{
		{Name: "kernel/shm_rmid_forced", Value: "1"}, {Name: "net.ipv4.ip_local_port_range", Value: "1024 65535"}}}
	cfg, err := m.generatePodSandboxConfig(pod, 0)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.ip_local_port_range": "1024 65535"}, cfg.GetLinux().GetSysctls())
}
