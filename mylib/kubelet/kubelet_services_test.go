package kubelet

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"mykubelet/mylib/kubetypes"
)

// serviceLister lists services, as the kubelet's informer would once synced.
func serviceLister(t *testing.T, services ...*v1.Service) corelisters.ServiceLister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range services {
		require.NoError(t, indexer.Add(s))
	}
	return corelisters.NewServiceLister(indexer)
}

func svc(ns, name, ip string, port int32) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ServiceSpec{ClusterIP: ip, Ports: []v1.ServicePort{{Port: port, Protocol: v1.ProtocolTCP}}}}
}

// The cluster of these tests: the API server's Service, one of the pod's
// namespace (app), a headless one, and one of another namespace.
func testServices(t *testing.T) corelisters.ServiceLister {
	kubernetes := svc("default", "kubernetes", "10.96.0.1", 443)
	kubernetes.Spec.Ports[0].Name = "https"
	return serviceLister(t, kubernetes,
		svc("app", "redis-primary", "10.96.0.11", 6379),
		svc("app", "headless", v1.ClusterIPNone, 80),
		svc("default", "web", "10.96.0.12", 80),
		svc("other", "db", "10.96.0.13", 5432))
}

func TestGetServiceEnvVarMap(t *testing.T) {
	lister := testServices(t)
	kubernetesVars := map[string]string{
		"KUBERNETES_SERVICE_HOST":       "10.96.0.1",
		"KUBERNETES_SERVICE_PORT":       "443",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT":               "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP":       "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT":  "443",
		"KUBERNETES_PORT_443_TCP_ADDR":  "10.96.0.1",
	}

	t.Run("links off: the API server's Service only", func(t *testing.T) {
		m, err := getServiceEnvVarMap(lister, "app", false)
		require.NoError(t, err)
		assert.Equal(t, kubernetesVars, m)
	})

	t.Run("links on: the namespace's Services too, not the headless one nor another namespace's", func(t *testing.T) {
		m, err := getServiceEnvVarMap(lister, "app", true)
		require.NoError(t, err)
		want := map[string]string{
			"REDIS_PRIMARY_SERVICE_HOST":        "10.96.0.11",
			"REDIS_PRIMARY_SERVICE_PORT":        "6379",
			"REDIS_PRIMARY_PORT":                "tcp://10.96.0.11:6379",
			"REDIS_PRIMARY_PORT_6379_TCP":       "tcp://10.96.0.11:6379",
			"REDIS_PRIMARY_PORT_6379_TCP_PROTO": "tcp",
			"REDIS_PRIMARY_PORT_6379_TCP_PORT":  "6379",
			"REDIS_PRIMARY_PORT_6379_TCP_ADDR":  "10.96.0.11",
		}
		for k, v := range kubernetesVars {
			want[k] = v
		}
		assert.Equal(t, want, m)
	})

	t.Run("links off in default: still only kubernetes, not web", func(t *testing.T) {
		m, err := getServiceEnvVarMap(lister, "default", false)
		require.NoError(t, err)
		assert.Equal(t, kubernetesVars, m)
	})

	t.Run("a namespace's own kubernetes Service takes default's place, as upstream", func(t *testing.T) {
		l := serviceLister(t, svc("default", "kubernetes", "10.96.0.1", 443), svc("app", "kubernetes", "10.96.0.99", 8443))
		m, err := getServiceEnvVarMap(l, "app", true)
		require.NoError(t, err)
		assert.Equal(t, "10.96.0.99", m["KUBERNETES_SERVICE_HOST"])
		m, err = getServiceEnvVarMap(l, "app", false)
		require.NoError(t, err)
		assert.Equal(t, "10.96.0.1", m["KUBERNETES_SERVICE_HOST"], "without links, default's")
	})

	t.Run("no lister: no variables", func(t *testing.T) {
		m, err := getServiceEnvVarMap(nil, "app", true)
		require.NoError(t, err)
		assert.Empty(t, m)
	})
}

// TestServiceVariablesInTheEnvironment: explicit env and envFrom entries
// win over service variables; $(VAR) sees the service variables; the
// service variables the container did not define are added.
func TestServiceVariablesInTheEnvironment(t *testing.T) {
	client := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "app"},
		Data: map[string]string{"REDIS_PRIMARY_SERVICE_PORT": "from-configmap"}})
	pod := envPod()
	pod.Namespace = "app"
	c := &v1.Container{Name: "app",
		EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		Env: []v1.EnvVar{
			{Name: "KUBERNETES_SERVICE_HOST", Value: "explicit"},
			{Name: "REDIS_URL", Value: "redis://$(REDIS_PRIMARY_SERVICE_HOST):$(REDIS_PRIMARY_SERVICE_PORT)"},
			{Name: "API", Value: "$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
		}}
	h := &PodRuntimeHelper{Client: client, Services: testServices(t), ServicesSynced: func() bool { return true }}
	opts, err := h.GenerateRunContainerOptions(context.Background(), pod, c, "", nil, nil)
	require.NoError(t, err)
	env := envMap(opts.Envs)
	assert.Equal(t, "explicit", env["KUBERNETES_SERVICE_HOST"], "env wins")
	assert.Equal(t, "from-configmap", env["REDIS_PRIMARY_SERVICE_PORT"], "envFrom wins")
	assert.Equal(t, "redis://10.96.0.11:from-configmap", env["REDIS_URL"], "$(VAR): the container's own first, then the services'")
	assert.Equal(t, "explicit:443", env["API"])
	assert.Equal(t, "tcp://10.96.0.1:443", env["KUBERNETES_PORT"], "the rest are added")
	assert.Equal(t, "10.96.0.11", env["REDIS_PRIMARY_SERVICE_HOST"])
	names := map[string]int{}
	for _, e := range opts.Envs {
		names[e.Name]++
	}
	for n, count := range names {
		assert.Equal(t, 1, count, "%s once", n)
	}

	pod.Spec.EnableServiceLinks = ptr.To(false)
	opts, err = h.GenerateRunContainerOptions(context.Background(), pod, &v1.Container{Name: "app"}, "", nil, nil)
	require.NoError(t, err)
	env = envMap(opts.Envs)
	assert.Equal(t, "10.96.0.1", env["KUBERNETES_SERVICE_HOST"], "always")
	assert.NotContains(t, env, "REDIS_PRIMARY_SERVICE_HOST", "enableServiceLinks: false")
}

// TestNoEnvironmentBeforeTheServicesAreListed: a pod from the API server
// waits for the Services' first list, so that it does not start without
// KUBERNETES_SERVICE_HOST; a static pod does not.
func TestNoEnvironmentBeforeTheServicesAreListed(t *testing.T) {
	h := &PodRuntimeHelper{Client: fake.NewClientset(), Services: serviceLister(t), ServicesSynced: func() bool { return false }}
	_, err := h.GenerateRunContainerOptions(context.Background(), envPod(), &v1.Container{Name: "app"}, "", nil, nil)
	assert.EqualError(t, err, "services have not yet been read at least once, cannot construct envvars")

	static := envPod()
	static.Annotations = map[string]string{kubetypes.ConfigSourceAnnotationKey: kubetypes.FileSource}
	_, err = h.GenerateRunContainerOptions(context.Background(), static, &v1.Container{Name: "app"}, "", nil, nil)
	assert.NoError(t, err)
}
