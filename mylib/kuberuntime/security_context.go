package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	runtimeutil "mykubelet/mylib/kuberuntime/util"
)

// DefaultSeccompProfileRoot is where a Localhost seccomp profile is
// looked for: upstream's <root-dir>/seccomp with the default root dir.
const DefaultSeccompProfileRoot = "/var/lib/kubelet/seccomp"

// DetermineEffectiveSecurityContext is the container's security context
// with the pod's under it, as upstream's pkg/securitycontext: the pod
// gives the user, group, runAsNonRoot, SELinux, seccomp and AppArmor
// settings, and the container's own fields win. nil if neither has one.
func DetermineEffectiveSecurityContext(pod *v1.Pod, container *v1.Container) *v1.SecurityContext {
	var eff *v1.SecurityContext
	if psc := pod.Spec.SecurityContext; psc != nil {
		eff = &v1.SecurityContext{
			SELinuxOptions:  psc.SELinuxOptions,
			WindowsOptions:  psc.WindowsOptions,
			RunAsUser:       psc.RunAsUser,
			RunAsGroup:      psc.RunAsGroup,
			RunAsNonRoot:    psc.RunAsNonRoot,
			SeccompProfile:  psc.SeccompProfile,
			AppArmorProfile: psc.AppArmorProfile,
		}
	}
	csc := container.SecurityContext
	switch {
	case csc == nil:
		return eff.DeepCopy()
	case eff == nil:
		return csc.DeepCopy()
	}
	if csc.SELinuxOptions != nil {
		eff.SELinuxOptions = csc.SELinuxOptions
	}
	if csc.WindowsOptions != nil {
		eff.WindowsOptions = csc.WindowsOptions
	}
	if csc.Capabilities != nil {
		eff.Capabilities = csc.Capabilities
	}
	if csc.Privileged != nil {
		eff.Privileged = csc.Privileged
	}
	if csc.RunAsUser != nil {
		eff.RunAsUser = csc.RunAsUser
	}
	if csc.RunAsGroup != nil {
		eff.RunAsGroup = csc.RunAsGroup
	}
	if csc.RunAsNonRoot != nil {
		eff.RunAsNonRoot = csc.RunAsNonRoot
	}
	if csc.ReadOnlyRootFilesystem != nil {
		eff.ReadOnlyRootFilesystem = csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		eff.AllowPrivilegeEscalation = csc.AllowPrivilegeEscalation
	}
	if csc.ProcMount != nil {
		eff.ProcMount = csc.ProcMount
	}
	if csc.SeccompProfile != nil {
		eff.SeccompProfile = csc.SeccompProfile
	}
	if csc.AppArmorProfile != nil {
		eff.AppArmorProfile = csc.AppArmorProfile
	}
	return eff.DeepCopy()
}

// determineEffectiveSecurityContext is the container's CRI security
// context, as upstream's: the effective context's user, group,
// privileged, read-only root, capabilities and SELinux; NoNewPrivs when
// allowPrivilegeEscalation is false; the seccomp and AppArmor profiles;
// the image's user when none is asked (uid or username); the pod's
// namespaces; and fsGroup then supplementalGroups as supplemental groups.
// Unlike upstream it leaves out the groups a volume asks for (upstream's
// GetExtraSupplementalGroupsForPod), supplementalGroupsPolicy and the
// masked and read-only /proc paths (the runtime's defaults apply).
func (m *Manager) determineEffectiveSecurityContext(pod *v1.Pod, container *v1.Container, uid *int64, username string) (*runtimeapi.LinuxContainerSecurityContext, error) {
	eff := DetermineEffectiveSecurityContext(pod, container)
	sc := &runtimeapi.LinuxContainerSecurityContext{}
	if eff != nil {
		if eff.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *eff.RunAsUser}
		}
		if eff.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *eff.RunAsGroup}
		}
		if eff.Privileged != nil {
			sc.Privileged = *eff.Privileged
		}
		if eff.ReadOnlyRootFilesystem != nil {
			sc.ReadonlyRootfs = *eff.ReadOnlyRootFilesystem
		}
		if c := eff.Capabilities; c != nil {
			sc.Capabilities = &runtimeapi.Capability{}
			for _, a := range c.Add {
				sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
			}
			for _, d := range c.Drop {
				sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
			}
		}
		if o := eff.SELinuxOptions; o != nil {
			sc.SelinuxOptions = &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
		}
		// upstream's AddNoNewPrivileges: only an explicit false sets it.
		sc.NoNewPrivs = eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation
	}
	var err error
	if sc.Seccomp, err = seccompProfile(pod.Spec.SecurityContext, container.SecurityContext); err != nil {
		return nil, err
	}
	if sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(pod, container); err != nil {
		return nil, err
	}
	if sc.RunAsUser == nil {
		if uid != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *uid}
		}
		sc.RunAsUsername = username
	}
	sc.NamespaceOptions = runtimeutil.NamespacesForPod(pod)
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
	}
	return sc, nil
}

// seccompProfile is the container's seccomp profile, as upstream's
// getSeccompProfile with seccompDefault off (its default): the
// container's field, else the pod's, else Unconfined. A Localhost
// profile is a file under DefaultSeccompProfileRoot.
func seccompProfile(podSC *v1.PodSecurityContext, containerSC *v1.SecurityContext) (*runtimeapi.SecurityProfile, error) {
	var p *v1.SeccompProfile
	switch {
	case containerSC != nil && containerSC.SeccompProfile != nil:
		p = containerSC.SeccompProfile
	case podSC != nil && podSC.SeccompProfile != nil:
		p = podSC.SeccompProfile
	default:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil {
			return nil, errors.New("localhostProfile must be set if seccompProfile type is Localhost")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(DefaultSeccompProfileRoot, *p.LocalhostProfile)}, nil
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// appArmorProfile is the container's AppArmor profile, as upstream's
// getAppArmorProfile: the container's field, its deprecated annotation,
// else the pod's field; none (nil) leaves the runtime's default. The
// string is the same profile in the deprecated annotation form, for
// runtimes that read only that.
func appArmorProfile(pod *v1.Pod, container *v1.Container) (*runtimeapi.SecurityProfile, string, error) {
	var p *v1.AppArmorProfile
	if container.SecurityContext != nil && container.SecurityContext.AppArmorProfile != nil {
		p = container.SecurityContext.AppArmorProfile
	} else if a, ok := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+container.Name]; ok {
		switch {
		case a == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		case a == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
			p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(a, v1.DeprecatedAppArmorBetaProfileNamePrefix):
			name := strings.TrimPrefix(a, v1.DeprecatedAppArmorBetaProfileNamePrefix)
			p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if p == nil && pod.Spec.SecurityContext != nil {
		p = pod.Spec.SecurityContext.AppArmorProfile
	}
	if p == nil {
		return nil, "", nil
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, v1.DeprecatedAppArmorBetaProfileRuntimeDefault, nil
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, v1.DeprecatedAppArmorBetaProfileNameUnconfined, nil
	case v1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil {
			return nil, "", errors.New("missing localhost apparmor profile name")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			v1.DeprecatedAppArmorBetaProfileNamePrefix + *p.LocalhostProfile, nil
	}
	return nil, "", fmt.Errorf("unknown apparmor profile type: %q", p.Type)
}

// verifyRunAsNonRoot refuses a container that asks runAsNonRoot but would
// run as root: runAsUser 0, or no runAsUser and an image whose user is
// uid 0 (or a name, which cannot be checked), with upstream's messages.
// The error makes the start a CreateContainerConfigError.
func verifyRunAsNonRoot(pod *v1.Pod, container *v1.Container, uid *int64, username string) error {
	eff := DetermineEffectiveSecurityContext(pod, container)
	if eff == nil || eff.RunAsNonRoot == nil || !*eff.RunAsNonRoot {
		return nil
	}
	if eff.RunAsUser != nil {
		if *eff.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", podDesc(pod), container.Name)
		}
		return nil
	}
	switch {
	case uid == nil && username != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", username, podDesc(pod), container.Name)
	case uid != nil && *uid == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", podDesc(pod), container.Name)
	case uid != nil && (*uid < 0 || *uid > math.MaxInt32):
		return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)) (pod: %q, container: %s)", *uid, math.MaxInt32, podDesc(pod), container.Name)
	}
	return nil
}

// getImageUser is the user the image runs as, as the runtime reports it:
// a uid, or a user name, or (neither) root.
func (m *Manager) getImageUser(ctx context.Context, image string) (*int64, string, error) {
	resp, err := m.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return nil, "", fmt.Errorf("image status of %s: %w", image, err)
	}
	if img := resp.GetImage(); img != nil {
		if img.Uid != nil {
			uid := img.Uid.Value
			return &uid, "", nil
		}
		if img.Username != "" {
			return nil, img.Username, nil
		}
	}
	return new(int64), "", nil
}

// needsImageUser tells whether the container's config needs the image's
// user: its effective context names no runAsUser and either asks
// runAsNonRoot (to check it) or a runAsGroup (which CRI runtimes refuse
// without a user). Unlike upstream, which asks the image for every
// container, the runtime otherwise runs the image's user by itself.
func needsImageUser(pod *v1.Pod, container *v1.Container) bool {
	eff := DetermineEffectiveSecurityContext(pod, container)
	if eff == nil || eff.RunAsUser != nil {
		return false
	}
	return (eff.RunAsNonRoot != nil && *eff.RunAsNonRoot) || eff.RunAsGroup != nil
}

// hasPrivilegedContainer tells whether any of the pod's containers
// (init, regular, ephemeral) asks to be privileged: its sandbox must be.
func hasPrivilegedContainer(pod *v1.Pod) bool {
	privileged := func(sc *v1.SecurityContext) bool {
		return sc != nil && sc.Privileged != nil && *sc.Privileged
	}
	for _, c := range pod.Spec.InitContainers {
		if privileged(c.SecurityContext) {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if privileged(c.SecurityContext) {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if privileged(c.SecurityContext) {
			return true
		}
	}
	return false
}
