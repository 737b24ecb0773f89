// Package token is the kubelet's service account token manager,
// upstream's pkg/kubelet/token: it asks the API for tokens bound to a pod
// (TokenRequest, "create serviceaccounts/token"), caches them and asks
// again when one is older than 80% of its lifetime or than 24 hours, so a
// projected volume remounted every sync period rewrites a fresh token
// long before the old one expires.
//
// Where it departs from upstream, and why: the periodic cleanup of
// expired tokens runs in Run(ctx), a loop on the injected clock, instead
// of a goroutine the constructor starts and nothing stops (the course's
// rule: every loop is Run(ctx) and is waited for).
package token

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// maxTTL: a token older than this is refreshed whatever its lifetime.
	maxTTL = 24 * time.Hour
	// gcPeriod is how often Run drops expired tokens.
	gcPeriod = time.Minute
	// maxJitter spreads the refreshes of many pods a little.
	maxJitter = 10 * time.Second
)

// Manager caches service account tokens.
type Manager struct {
	getToken func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	clock    clock.Clock

	mu    sync.Mutex
	cache map[string]*authenticationv1.TokenRequest
}

// NewManager returns a manager that requests tokens with client (the
// node's credentials: the Node authorizer lets a node create a token only
// for a service account of a pod bound to it, bound to that pod).
func NewManager(client kubernetes.Interface, clk clock.Clock) *Manager {
	return &Manager{
		getToken: func(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			if client == nil {
				return nil, errors.New("cannot use TokenManager when kubelet is in standalone mode")
			}
			out, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(context.TODO(), name, tr, metav1.CreateOptions{})
			if err != nil {
				return nil, err
			}
			if out.Spec.ExpirationSeconds == nil || out.Status.ExpirationTimestamp.IsZero() {
				return nil, fmt.Errorf("token request for %s/%s: the answer has no expiration", namespace, name)
			}
			return out, nil
		},
		clock: clk,
		cache: map[string]*authenticationv1.TokenRequest{},
	}
}

// GetServiceAccountToken returns a token of service account
// namespace/name as tr asks (audiences, lifetime, bound object): the
// cached one while it is fresh, else a new one. When the refresh fails
// the cached one is returned as long as it has not expired.
func (m *Manager) GetServiceAccountToken(namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	key := keyFunc(name, namespace, tr)
	m.mu.Lock()
	cached, ok := m.cache[key]
	m.mu.Unlock()
	if ok && !m.requiresRefresh(cached) {
		return cached, nil
	}

	fresh, err := m.getToken(namespace, name, tr)
	if err != nil {
		switch {
		case !ok:
			return nil, fmt.Errorf("failed to fetch token: %w", err)
		case m.expired(cached):
			return nil, fmt.Errorf("token %s expired and refresh failed: %w", key, err)
		default:
			klog.ErrorS(err, "Couldn't update token", "cacheKey", key)
			return cached, nil
		}
	}
	m.mu.Lock()
	m.cache[key] = fresh
	m.mu.Unlock()
	return fresh, nil
}

// DeleteServiceAccountToken forgets every token bound to the pod.
func (m *Manager) DeleteServiceAccountToken(podUID types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, tr := range m.cache {
		if tr.Spec.BoundObjectRef != nil && tr.Spec.BoundObjectRef.UID == podUID {
			delete(m.cache, k)
		}
	}
}

// Run drops expired tokens every minute until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	for {
		t := m.clock.NewTimer(gcPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
			m.cleanup()
		}
	}
}

func (m *Manager) cleanup() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, tr := range m.cache {
		if m.expired(tr) {
			delete(m.cache, k)
		}
	}
}

func (m *Manager) expired(tr *authenticationv1.TokenRequest) bool {
	return m.clock.Now().After(tr.Status.ExpirationTimestamp.Time)
}

// requiresRefresh is upstream's: a token older than 24 h, or within 20%
// of its lifetime of the expiry, each less a jitter of up to 10 s.
func (m *Manager) requiresRefresh(tr *authenticationv1.TokenRequest) bool {
	if tr.Spec.ExpirationSeconds == nil {
		klog.ErrorS(nil, "Expiration seconds was nil for token request", "boundObject", tr.Spec.BoundObjectRef)
		return false
	}
	now := m.clock.Now()
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	exp := tr.Status.ExpirationTimestamp.Time
	issued := exp.Add(-ttl)
	jitter := time.Duration(rand.Float64()*maxJitter.Seconds()) * time.Second
	if now.After(issued.Add(maxTTL - jitter)) {
		return true
	}
	return now.After(exp.Add(-ttl*20/100 - jitter))
}

// keyFunc: one cache entry per service account, audiences, lifetime and
// bound object (so two pods never share a token).
func keyFunc(name, namespace string, tr *authenticationv1.TokenRequest) string {
	var exp int64
	if tr.Spec.ExpirationSeconds != nil {
		exp = *tr.Spec.ExpirationSeconds
	}
	var ref authenticationv1.BoundObjectReference
	if tr.Spec.BoundObjectRef != nil {
		ref = *tr.Spec.BoundObjectRef
	}
	return fmt.Sprintf("%q/%q/%#v/%#v/%#v", name, namespace, tr.Spec.Audiences, exp, ref)
}
