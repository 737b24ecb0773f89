package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// User is who sent a request, as the API server would name them.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Attributes is what the kubelet asks the API server whether User may do:
// a verb on a subresource of this node (upstream's
// authorizer.AttributesRecord, only the fields the kubelet fills).
type Attributes struct {
	User        User
	Verb        string // get, create, update, patch, delete
	Subresource string // proxy, log, stats, metrics, pods, healthz, …
	NodeName    string
	Path        string
}

// Authenticator says who sent a request: ok false (and no error) when it
// carries no credentials this authenticator accepts.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (u User, ok bool, err error)
}

// Authorizer decides whether attrs are allowed.
type Authorizer interface {
	Authorize(ctx context.Context, attrs Attributes) (allowed bool, reason string, err error)
}

// Paths of the kubelet API whose subresources are not "proxy" (upstream's
// server.go constants).
const (
	statsPath       = "/stats/"
	metricsPath     = "/metrics"
	logsPath        = "/logs/"
	checkpointPath  = "/checkpoint/"
	podsPath        = "/pods"
	runningPodsPath = "/runningpods/"
	healthzPath     = "/healthz"
	configzPath     = "/configz"
	statuszPath     = "/statusz"
	flagzPath       = "/flagz"
)

// isSubpath is upstream's: subpath is path or below it.
func isSubpath(subpath, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return subpath == path || (strings.HasPrefix(subpath, path) && subpath[len(path)] == '/')
}

// GetRequestAttributes maps a request to what is authorized, as upstream's
// nodeAuthorizerAttributesGetter does with KubeletFineGrainedAuthz (GA and
// locked on since v1.36): the verb from the HTTP method, resource nodes,
// name the node, and the subresources in the order they are tried (the
// first allowed wins):
//
//	/stats/*       stats
//	/metrics/*     metrics
//	/logs/*        log
//	/checkpoint/*  checkpoint
//	/statusz       statusz
//	/flagz         configz
//	/pods/*        pods, then proxy
//	/runningpods/* pods, then proxy
//	/healthz/*     healthz, then proxy
//	/configz       configz, then proxy
//	anything else  proxy (/containerLogs, /exec, /attach, /portForward, /run …)
func GetRequestAttributes(nodeName string, u User, r *http.Request) []Attributes {
	verb := ""
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	p := r.URL.Path
	var subresources []string
	switch {
	case isSubpath(p, podsPath):
		subresources = append(subresources, "pods")
	case isSubpath(p, healthzPath):
		subresources = append(subresources, "healthz")
	case isSubpath(p, configzPath):
		subresources = append(subresources, "configz")
	case isSubpath(p, runningPodsPath):
		subresources = append(subresources, "pods")
	}
	switch {
	case isSubpath(p, statsPath):
		subresources = append(subresources, "stats")
	case isSubpath(p, metricsPath):
		subresources = append(subresources, "metrics")
	case isSubpath(p, logsPath):
		subresources = append(subresources, "log") // as pods/log
	case isSubpath(p, checkpointPath):
		subresources = append(subresources, "checkpoint")
	case isSubpath(p, statuszPath):
		subresources = append(subresources, "statusz")
	case isSubpath(p, flagzPath):
		subresources = append(subresources, "configz")
	default:
		subresources = append(subresources, "proxy")
	}
	attrs := make([]Attributes, 0, len(subresources))
	for _, s := range subresources {
		attrs = append(attrs, Attributes{User: u, Verb: verb, Subresource: s, NodeName: nodeName, Path: p})
	}
	return attrs
}

// WithAuth wraps h in upstream's InstallAuthFilter: authenticate (401
// "Unauthorized" when nobody is), then authorize each of the request's
// attributes in turn until one is allowed (403 with upstream's line when
// none is, 500 when the authorizer fails).
func WithAuth(nodeName string, authn Authenticator, authz Authorizer, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := authn.AuthenticateRequest(r)
		if err != nil {
			klog.ErrorS(err, "Unable to authenticate the request due to an error")
		}
		if err != nil || !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := GetRequestAttributes(nodeName, u, r)
		subresources := make([]string, 0, len(attrs))
		for _, a := range attrs {
			subresources = append(subresources, a.Subresource)
			allowed, _, err := authz.Authorize(r.Context(), a)
			if err != nil {
				klog.ErrorS(err, "Authorization error", "user", u.Name, "verb", a.Verb, "subresource", a.Subresource)
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", u.Name, a.Verb, a.Subresource), http.StatusInternalServerError)
				return
			}
			if allowed {
				h.ServeHTTP(w, r)
				return
			}
		}
		klog.V(2).InfoS("Forbidden", "user", u.Name, "verb", attrs[0].Verb, "subresources", subresources)
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, attrs[0].Verb, subresources), http.StatusForbidden)
	})
}

// X509Authenticator authenticates a request by its TLS client certificate,
// verified against the cluster CA for client authentication: the user is
// the subject's CN, the groups its O (upstream's x509 authenticator with
// CommonNameUserConversion). The server must ask for client certificates
// without verifying them itself (tls.RequestClientCert), so that one from
// another CA is a 401 here, as upstream's, rather than a failed handshake.
type X509Authenticator struct {
	Roots *x509.CertPool
}

// AuthenticateRequest implements Authenticator.
func (a X509Authenticator) AuthenticateRequest(r *http.Request) (User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return User{}, false, nil
	}
	certs := r.TLS.PeerCertificates
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: a.Roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return User{}, false, fmt.Errorf("verifying certificate %s: %w", certs[0].Subject, err)
	}
	if certs[0].Subject.CommonName == "" {
		return User{}, false, nil
	}
	return User{Name: certs[0].Subject.CommonName, Groups: certs[0].Subject.Organization}, true, nil
}

// TokenReviewAuthenticator authenticates a bearer token by asking the API
// server (a TokenReview, with the node's own credentials: the Node
// authorizer lets a node create them). Upstream's webhook token
// authenticator also caches answers for 2 minutes; this one asks every time.
type TokenReviewAuthenticator struct {
	Client kubernetes.Interface
}

// AuthenticateRequest implements Authenticator.
func (a TokenReviewAuthenticator) AuthenticateRequest(r *http.Request) (User, bool, error) {
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, token, found := strings.Cut(auth, " ")
	if !found || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return User{}, false, nil
	}
	tr, err := a.Client.AuthenticationV1().TokenReviews().Create(r.Context(),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: strings.TrimSpace(token)}}, metav1.CreateOptions{})
	if err != nil {
		return User{}, false, fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		return User{}, false, nil
	}
	u := tr.Status.User
	extra := map[string][]string{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	return User{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}, true, nil
}

// UnionAuthenticator tries each in order; the first that knows the request wins.
type UnionAuthenticator []Authenticator

// AuthenticateRequest implements Authenticator.
func (as UnionAuthenticator) AuthenticateRequest(r *http.Request) (User, bool, error) {
	var errs []error
	for _, a := range as {
		u, ok, err := a.AuthenticateRequest(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return u, true, nil
		}
	}
	if len(errs) > 0 {
		return User{}, false, fmt.Errorf("%v", errs)
	}
	return User{}, false, nil
}

// SubjectAccessReviewAuthorizer asks the API server (a SubjectAccessReview,
// with the node's credentials). Upstream's webhook authorizer caches
// answers (allowed 5 minutes, denied 30 s); this one asks every time.
type SubjectAccessReviewAuthorizer struct {
	Client kubernetes.Interface
}

// Authorize implements Authorizer.
func (a SubjectAccessReviewAuthorizer) Authorize(ctx context.Context, attrs Attributes) (bool, string, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range attrs.User.Extra {
		extra[k] = v
	}
	sar, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: attrs.User.Name, UID: attrs.User.UID, Groups: attrs.User.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: attrs.Verb, Version: "v1", Resource: "nodes", Subresource: attrs.Subresource, Name: attrs.NodeName,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	return sar.Status.Allowed, sar.Status.Reason, nil
}
