package kuberuntime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"mykubelet/mylib/images"
)

// The image errors; their text is the waiting reason a container's status
// shows. They are mylib/images' (upstream pkg/kubelet/images/types.go),
// named here too for this package's callers.
var (
	ErrImagePullBackOff = images.ErrImagePullBackOff
	ErrImageInspect     = images.ErrImageInspect
	ErrImagePull        = images.ErrImagePull
	ErrImageNeverPull   = images.ErrImageNeverPull
	ErrInvalidImageName = images.ErrInvalidImageName
)

// imagePulls is the Manager's image manager (upstream's
// kubeGenericRuntimeManager.imagePuller), built on first use with
// images.DefaultPullConfig, rebuilt by SetImagePullConfig. The back-off
// outlives a rebuild.
type imagePulls struct {
	mu      sync.Mutex
	manager images.ImageManager
	backOff *flowcontrol.Backoff
}

// imageManager returns the image manager, building it the first time.
func (m *Manager) imageManager() images.ImageManager {
	m.imagePulls.mu.Lock()
	defer m.imagePulls.mu.Unlock()
	if m.imagePulls.manager == nil {
		m.imagePulls.manager = m.newImageManagerLocked(images.DefaultPullConfig())
	}
	return m.imagePulls.manager
}

func (m *Manager) newImageManagerLocked(c images.PullConfig) images.ImageManager {
	if m.imagePulls.backOff == nil {
		clk := m.clock
		if clk == nil {
			clk = clock.RealClock{}
		}
		m.imagePulls.backOff = images.NewImageBackOff(clk)
	}
	return images.NewImageManager(m.recorder, m, m.imagePulls.backOff, c)
}

// SetImagePullConfig sets how the manager pulls images (serial or
// parallel, the registry QPS); before it is called, images.DefaultPullConfig.
// A pull under way finishes under the old configuration.
func (m *Manager) SetImagePullConfig(c images.PullConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	m.imagePulls.mu.Lock()
	defer m.imagePulls.mu.Unlock()
	m.imagePulls.manager = m.newImageManagerLocked(c)
	return nil
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

// EnsureImageExists pulls the container's image if its pull policy asks
// for it and returns the image's reference (its ID), recording Pulling,
// Pulled and the failures as events on ref (images.ImageManager; the pod
// is ref's: its UID keys the pull back-off). pullSecrets are tried in turn
// for the image's registry, then no credentials.
func (m *Manager) EnsureImageExists(ctx context.Context, ref *v1.ObjectReference, container *v1.Container, pullSecrets []v1.Secret, sandboxConfig *runtimeapi.PodSandboxConfig) (imageRef, message string, err error) {
	pod := &v1.Pod{}
	if ref != nil {
		pod.ObjectMeta = metav1.ObjectMeta{UID: ref.UID, Name: ref.Name, Namespace: ref.Namespace}
	}
	return m.imageManager().EnsureImageExists(ctx, ref, pod, container.Image, pullSecrets, sandboxConfig, imagePullPolicy(container))
}

// GetImageRef returns the image's ID, or "" if the runtime does not have
// it (upstream's kubeGenericRuntimeManager.GetImageRef).
func (m *Manager) GetImageRef(ctx context.Context, image *runtimeapi.ImageSpec) (string, error) {
	st, err := m.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image})
	if err != nil {
		return "", err
	}
	return st.GetImage().GetId(), nil
}

// PullImage pulls the image with each credential of pullSecrets for its
// registry in turn, then none, and returns the image's reference, or the
// last error (upstream's kubeGenericRuntimeManager.PullImage).
func (m *Manager) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, pullSecrets []v1.Secret, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	var lastErr error
	for _, auth := range append(credentialsFor(image.GetImage(), pullSecrets), nil) {
		resp, err := m.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandboxConfig})
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
