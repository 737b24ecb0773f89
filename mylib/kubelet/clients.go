package kubelet

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The kubelet's API client rates (KubeletConfiguration kubeAPIQPS,
// kubeAPIBurst, eventRecordQPS, eventBurst). client-go's own 5 and 10
// would queue the status writes of a burst of pods.
const (
	DefaultKubeAPIQPS     = 50
	DefaultKubeAPIBurst   = 100
	DefaultEventRecordQPS = 50
	DefaultEventBurst     = 100
)

// DefaultContentType is the kubelet's KubeletConfiguration contentType:
// protobuf, smaller and cheaper to encode and decode than JSON for the API
// server and for us. Patches are still sent as JSON (a patch's type is its
// own); what comes back, and what a watch sends, is protobuf.
const DefaultContentType = runtime.ContentTypeProtobuf

// useProtobuf sets the content types as upstream's setContentTypeForClient
// does: protobuf first, JSON for what has no protobuf form.
func useProtobuf(c *rest.Config) {
	c.ContentType = DefaultContentType
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
}

// NewClients makes the kubelet's two clients from the node's credentials,
// as upstream's cmd/kubelet (kubeDeps.KubeClient and EventClient): one for
// pods, nodes and leases at kubeAPIQPS/Burst, one for events at their own
// rate, so that a burst of events never delays a pod's status; both speak
// protobuf (DefaultContentType).
func NewClients(cfg *rest.Config) (client, eventClient *kubernetes.Clientset, err error) {
	return NewClientsWithRates(cfg, ClientRates{KubeAPIQPS: DefaultKubeAPIQPS, KubeAPIBurst: DefaultKubeAPIBurst,
		EventRecordQPS: DefaultEventRecordQPS, EventBurst: DefaultEventBurst})
}

// ClientRates are the rates of NewClientsWithRates, the
// KubeletConfiguration fields of the same names, handed to client-go as
// upstream's kubeClientConfigOverrides does.
type ClientRates struct {
	KubeAPIQPS, KubeAPIBurst, EventRecordQPS, EventBurst int32
}

// NewClientsWithRates is NewClients with the rates of a KubeletConfiguration.
func NewClientsWithRates(cfg *rest.Config, r ClientRates) (client, eventClient *kubernetes.Clientset, err error) {
	qps := func(q int32) float32 { return float32(q) }
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = qps(r.KubeAPIQPS), int(r.KubeAPIBurst)
	useProtobuf(c)
	if client, err = kubernetes.NewForConfig(c); err != nil {
		return nil, nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	e := rest.CopyConfig(cfg)
	e.QPS, e.Burst = qps(r.EventRecordQPS), int(r.EventBurst)
	useProtobuf(e)
	if eventClient, err = kubernetes.NewForConfig(e); err != nil {
		return nil, nil, fmt.Errorf("event client for %s: %w", cfg.Host, err)
	}
	return client, eventClient, nil
}

// NewTokenClient is a client for the token manager alone, at
// kubeAPIQPS/kubeAPIBurst of its own. Upstream's kubelet sends its
// TokenRequests through KubeClient, so under a burst of pods each pod's
// token and its status writes queue behind one another at kubeAPIQPS
// (100 pods: 100 tokens and 100 Running statuses, the last one 2 s after
// the first at 50 a second). With their own budget, neither waits for the
// other. This departs from upstream to start pods faster; the API server
// sees the same requests.
func NewTokenClient(cfg *rest.Config, kubeAPIQPS, kubeAPIBurst int32) (*kubernetes.Clientset, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = float32(kubeAPIQPS), int(kubeAPIBurst)
	useProtobuf(c)
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("token client for %s: %w", cfg.Host, err)
	}
	return cs, nil
}
