package kuberuntime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/events"
	"mykubelet/mylib/images"
)

// The image errors; their text is the waiting reason a container's status
// shows (upstream pkg/kubelet/images/types.go).
var (
	ErrImagePullBackOff = errors.New("ImagePullBackOff")
	ErrImageInspect     = errors.New("ImageInspectError")
	ErrImagePull        = errors.New("ErrImagePull")
	ErrImageNeverPull   = errors.New("ErrImageNeverPull")
	ErrInvalidImageName = errors.New("InvalidImageName")
)

// applyDefaultImageTag adds ":latest" to an image with neither tag nor
// digest, as the kubelet does before asking the runtime.
func applyDefaultImageTag(image string) (string, error) {
	if image == "" || strings.ContainsAny(image, " \t\n") || strings.HasSuffix(image, "/") {
		return "", fmt.Errorf("invalid image name %q", image)
	}
	if strings.Contains(image, "@") {
		return image, nil // pinned by digest
	}
	if last := image[strings.LastIndex(image, "/")+1:]; !strings.Contains(last, ":") {
		return image + ":latest", nil
	}
	return image, nil
}

// imagePullPolicy is the container's policy, defaulted as the API server
// would for a pod that skipped defaulting (e.g. a static pod): Always for
// ":latest" or no tag, IfNotPresent otherwise.
func imagePullPolicy(container *v1.Container) v1.PullPolicy {
	if container.ImagePullPolicy != "" {
		return container.ImagePullPolicy
	}
	last := container.Image[strings.LastIndex(container.Image, "/")+1:]
	if !strings.Contains(last, "@") && (!strings.Contains(last, ":") || strings.HasSuffix(last, ":latest")) {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

func shouldPullImage(policy v1.PullPolicy, present bool) bool {
	switch policy {
	case v1.PullNever:
		return false
	case v1.PullAlways:
		return true
	}
	return !present
}

// EnsureImageExists pulls the container's image if its pull policy asks
// for it and returns the image's reference (its ID), recording Pulling,
// Pulled and the failures as events on ref. pullSecrets are tried in turn
// for the image's registry, then no credentials.
func (m *Manager) EnsureImageExists(ctx context.Context, ref *v1.ObjectReference, container *v1.Container, pullSecrets []v1.Secret, sandboxConfig *runtimeapi.PodSandboxConfig) (imageRef, message string, err error) {
	image, err := applyDefaultImageTag(container.Image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", container.Image, err)
		m.event(ref, v1.EventTypeWarning, events.FailedToInspectImage, msg)
		return "", msg, ErrInvalidImageName
	}
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: container.Image}
	st, err := m.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
		m.event(ref, v1.EventTypeWarning, events.FailedToInspectImage, msg)
		return "", msg, ErrImageInspect
	}
	present := st.GetImage().GetId() != ""
	if !shouldPullImage(imagePullPolicy(container), present) {
		if present {
			m.event(ref, v1.EventTypeNormal, events.PulledImage, fmt.Sprintf("Container image %q already present on machine", image))
			return st.Image.Id, "", nil
		}
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		m.event(ref, v1.EventTypeWarning, events.ErrImageNeverPullPolicy, msg)
		return "", msg, ErrImageNeverPull
	}

	m.event(ref, v1.EventTypeNormal, events.PullingImage, fmt.Sprintf("Pulling image %q", image))
	start := m.clock.Now()
	imageRef, err = m.pullImage(ctx, spec, credentialsFor(image, pullSecrets), sandboxConfig)
	if err != nil {
		msg := fmt.Sprintf("Failed to pull image %q: %v", image, err)
		m.event(ref, v1.EventTypeWarning, events.FailedToPullImage, msg)
		return "", msg, ErrImagePull
	}
	m.event(ref, v1.EventTypeNormal, events.PulledImage, fmt.Sprintf("Successfully pulled image %q in %v",
		image, m.clock.Since(start).Round(time.Millisecond)))
	return imageRef, "", nil
}

// pullImage tries each credential, then none; it returns the last error.
func (m *Manager) pullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auths []*runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	var lastErr error
	for _, auth := range append(auths, nil) {
		resp, err := m.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec, Auth: auth, SandboxConfig: sandboxConfig})
		if err == nil {
			return resp.ImageRef, nil
		}
		lastErr = err
	}
	return "", lastErr
}

// dockerConfigEntry is one registry's entry of a .dockerconfigjson.
type dockerConfigEntry struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// credentialsFor reads the docker config of each pull secret and returns
// the entries for the image's registry. Unlike upstream's keyring it
// matches the registry host exactly (no globs, no path prefixes).
func credentialsFor(image string, secrets []v1.Secret) []*runtimeapi.AuthConfig {
	registry := imageRegistry(image)
	var auths []*runtimeapi.AuthConfig
	for _, s := range secrets {
		var entries map[string]dockerConfigEntry
		switch {
		case s.Type == v1.SecretTypeDockerConfigJson || len(s.Data[v1.DockerConfigJsonKey]) > 0:
			var cfg struct {
				Auths map[string]dockerConfigEntry `json:"auths"`
			}
			if json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &cfg) != nil {
				continue // malformed: skipped, as upstream
			}
			entries = cfg.Auths
		case len(s.Data[v1.DockerConfigKey]) > 0:
			if json.Unmarshal(s.Data[v1.DockerConfigKey], &entries) != nil {
				continue
			}
		}
		for key, e := range entries {
			if registryHost(key) != registry {
				continue
			}
			a := &runtimeapi.AuthConfig{Username: e.Username, Password: e.Password, Auth: e.Auth,
				ServerAddress: key, IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken}
			if a.Username == "" && e.Auth != "" {
				if b, err := base64.StdEncoding.DecodeString(e.Auth); err == nil {
					a.Username, a.Password, _ = strings.Cut(string(b), ":")
				}
			}
			auths = append(auths, a)
		}
	}
	return auths
}

// imageRegistry is the registry host of an image reference: its first
// component if it looks like a host, docker.io otherwise.
func imageRegistry(image string) string {
	first, _, found := strings.Cut(image, "/")
	if !found || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		return "docker.io"
	}
	return registryHost(first)
}

// registryHost normalizes a docker config key ("https://index.docker.io/v1/").
func registryHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key, _, _ = strings.Cut(key, "/")
	if key == "index.docker.io" || key == "registry-1.docker.io" {
		return "docker.io"
	}
	return key
}

// SetImagePullConfig sets how the manager pulls images (serial or
// parallel, the registry QPS); before it is called, images.DefaultPullConfig.
// SEAM: the images helper writes it.
func (m *Manager) SetImagePullConfig(c images.PullConfig) error {
	return nil
}
