package localcluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// metrics-server runs beside the control plane when Config.MetricsServer is
// set: a process on loopback, not a pod, with the identity and the RBAC of
// the upstream manifest (ServiceAccount kube-system/metrics-server).
//
// How the API server reaches it: the APIService v1beta1.metrics.k8s.io points
// at the Service kube-system/metrics-server. Without
// --enable-aggregator-routing the aggregator dials the Service's cluster IP,
// which nothing routes on this machine; with it, the Service's endpoints,
// which may not hold a loopback address. A Service of type ExternalName is
// resolved to its externalName and the APIService's port, so an ExternalName
// of 127.0.0.1 sends the aggregator to the process. TLS is verified: the
// APIService's caBundle is the cluster CA, and metrics-server's serving
// certificate names metrics-server.kube-system.svc, the name the aggregator
// checks.
const (
	// MetricsServerVersion is the version scripts/build-control-plane.sh builds.
	MetricsServerVersion = "v0.8.0"
	// MetricsServerNamespace and MetricsServerName name the ServiceAccount,
	// the Service and the RBAC subjects, as in the upstream manifest.
	MetricsServerNamespace = "kube-system"
	MetricsServerName      = "metrics-server"
	// MetricsAPIService is the APIService metrics-server serves.
	MetricsAPIService = "v1beta1.metrics.k8s.io"
	// DefaultMetricResolution is the upstream manifest's --metric-resolution.
	DefaultMetricResolution = 15 * time.Second
	// MinMetricResolution is the shortest --metric-resolution metrics-server
	// accepts.
	MinMetricResolution = 10 * time.Second
	// DefaultMetricsServerPort is the learner's cluster's metrics-server
	// port. The manifest's 10250 is the kubelet's port, which the tutorial's
	// kubelets use on this same loopback.
	DefaultMetricsServerPort = 4443
)

// metricsServerUser is the user name of the ServiceAccount
// kube-system/metrics-server: RBAC bindings to the ServiceAccount apply to a
// request authenticated with that name, whatever the credential.
var metricsServerUser = "system:serviceaccount:" + MetricsServerNamespace + ":" + MetricsServerName

// WithMetricsServer asks for metrics-server, scraping every
// MinMetricResolution so that a test sees `kubectl top` figures soon. It is
// an option for testcluster.Start:
//
//	c := testcluster.Start(t, localcluster.WithMetricsServer())
func WithMetricsServer() func(*Config) {
	return func(c *Config) {
		c.MetricsServer = true
		c.MetricResolution = MinMetricResolution
	}
}

// MetricsServerHost is metrics-server's URL, e.g. https://127.0.0.1:4443,
// or "" when the cluster runs without it. It serves with a certificate of the
// cluster CA for 127.0.0.1 and metrics-server.kube-system.svc.
func (c *Cluster) MetricsServerHost() string {
	if !c.cfg.MetricsServer {
		return ""
	}
	return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Ports.MetricsServer))
}

func (c *Cluster) metricsServerArgs() []string {
	kc := filepath.Join(c.cfg.Dir, "metrics-server.kubeconfig")
	res := c.cfg.MetricResolution
	if res == 0 {
		res = DefaultMetricResolution
	}
	a := []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.Ports.MetricsServer),
		"--tls-cert-file=" + c.pki("metrics-server-serving.crt"),
		"--tls-private-key-file=" + c.pki("metrics-server-serving.key"),
		// Its own identity for the API server and for kubelets (it sends
		// the kubeconfig's client certificate to both).
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		// The manifest's flags, but InternalIP only: the tutorial's nodes
		// report 127.0.0.1 there, and their hostnames resolve to nothing.
		"--kubelet-use-node-status-port",
		"--kubelet-preferred-address-types=InternalIP",
		// Kubelets serve with certificates the cluster CA signs for CSRs,
		// as the API server checks them (--kubelet-certificate-authority).
		"--kubelet-certificate-authority=" + c.pki("ca.crt"),
		"--metric-resolution=" + res.String(),
	}
	// metrics-server wants a scrape to time out before 90% of the
	// resolution; its default timeout, 10s, is too long for 10s.
	if timeout := res * 9 / 10; timeout < 10*time.Second {
		a = append(a, "--kubelet-request-timeout="+timeout.String())
	}
	return a
}

// applyMetricsServerObjects creates the upstream manifest's ServiceAccount
// and RBAC, and its Service and APIService adapted to a process on loopback.
func (c *Cluster) applyMetricsServerObjects(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	ns := MetricsServerNamespace
	sa := []rbacv1.Subject{{Kind: "ServiceAccount", Name: MetricsServerName, Namespace: ns}}
	readVerbs := []string{"get", "list", "watch"}
	create := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s: %w", what, err)
		}
		return nil
	}
	if err := create("serviceaccount", errOf(cs.CoreV1().ServiceAccounts(ns).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: MetricsServerName}}, metav1.CreateOptions{}))); err != nil {
		return err
	}
	roles := []*rbacv1.ClusterRole{
		{
			// Lets view, edit and admin read metrics (aggregated roles).
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregated-metrics-reader", Labels: map[string]string{
				"rbac.authorization.k8s.io/aggregate-to-view":  "true",
				"rbac.authorization.k8s.io/aggregate-to-edit":  "true",
				"rbac.authorization.k8s.io/aggregate-to-admin": "true",
			}},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods", "nodes"}, Verbs: readVerbs}},
		},
		{
			// What metrics-server itself reads: the kubelets' /metrics/resource
			// (nodes/metrics) and the nodes and pods it reports.
			ObjectMeta: metav1.ObjectMeta{Name: "system:metrics-server"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
				{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: readVerbs},
			},
		},
	}
	for _, r := range roles {
		if err := create("clusterrole "+r.Name, errOf(cs.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}))); err != nil {
			return err
		}
	}
	for _, b := range []*rbacv1.ClusterRoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "system:metrics-server"}, Subjects: sa,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:metrics-server"}},
		// TokenReviews and SubjectAccessReviews for its own clients.
		{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server:system:auth-delegator"}, Subjects: sa,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"}},
	} {
		if err := create("clusterrolebinding "+b.Name, errOf(cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}))); err != nil {
			return err
		}
	}
	// The configmap kube-system/extension-apiserver-authentication says
	// which front proxy (the aggregator) may pass a user in headers.
	if err := create("rolebinding metrics-server-auth-reader", errOf(cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server-auth-reader"}, Subjects: sa,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
	}, metav1.CreateOptions{}))); err != nil {
		return err
	}

	// The Service: ExternalName 127.0.0.1 (see above). Recreated on every
	// start: an old one may be of the manifest's type.
	svcs := cs.CoreV1().Services(ns)
	if err := svcs.Delete(ctx, MetricsServerName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the old service: %w", err)
	}
	if err := create("service", errOf(svcs.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: MetricsServerName, Labels: map[string]string{"k8s-app": MetricsServerName}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(c.Ports.MetricsServer), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{}))); err != nil {
		return err
	}

	// The APIService, through the dynamic client (its typed client is in
	// k8s.io/kube-aggregator, a module this one does not need otherwise).
	// Created or replaced: the port changes from one start to the next.
	apiSvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": MetricsAPIService, "labels": map[string]any{"k8s-app": MetricsServerName}},
		"spec": map[string]any{
			"service":              map[string]any{"name": MetricsServerName, "namespace": ns, "port": int64(c.Ports.MetricsServer)},
			"group":                "metrics.k8s.io",
			"version":              "v1beta1",
			"caBundle":             base64.StdEncoding.EncodeToString(c.ca.CertPEM), // []byte: base64 in JSON
			"groupPriorityMinimum": int64(100),
			"versionPriority":      int64(100),
		},
	}}
	// The aggregator writes the old APIService's status meanwhile (it
	// finds the old port unavailable): on a conflict, read it and try again.
	apis := dyn.Resource(apiServiceGVR)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		old, err := apis.Get(ctx, MetricsAPIService, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = apis.Create(ctx, apiSvc, metav1.CreateOptions{})
		case err == nil:
			apiSvc.SetResourceVersion(old.GetResourceVersion())
			_, err = apis.Update(ctx, apiSvc, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("apiservice %s: %w", MetricsAPIService, err)
	}
	return nil
}

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

func errOf[T any](_ T, err error) error { return err }

// apiServiceAvailable returns nil once the APIService's Available condition
// is True, else an error with the condition's message.
func apiServiceAvailable(ctx context.Context, dyn dynamic.Interface) error {
	u, err := dyn.Resource(apiServiceGVR).Get(ctx, MetricsAPIService, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			if m["status"] == "True" {
				return nil
			}
			return fmt.Errorf("APIService %s is not Available: %v: %v", MetricsAPIService, m["reason"], m["message"])
		}
	}
	return fmt.Errorf("APIService %s has no Available condition yet", MetricsAPIService)
}

// startMetricsServer applies the objects, starts the process and waits until
// the aggregator finds it available.
func (c *Cluster) startMetricsServer(ctx context.Context, cs kubernetes.Interface) error {
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := c.applyMetricsServerObjects(ctx, cs, dyn); err != nil {
		return fmt.Errorf("metrics-server: %w", err)
	}
	if err := c.launch(MetricsServerName); err != nil {
		return err
	}
	return c.waitFor(ctx, "APIService "+MetricsAPIService+" Available", func() error { return apiServiceAvailable(ctx, dyn) })
}
