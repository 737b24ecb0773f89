// Package clustertrustbundle is upstream's pkg/kubelet/clustertrustbundle:
// the trust anchors of ClusterTrustBundles (certificates.k8s.io/v1), for
// the projected volume's clusterTrustBundle source. A ClusterTrustBundle
// is cluster-scoped and readable by every node, so one informer watches
// them all; it starts on the first call (as upstream's
// LazyInformerManager), so a node whose pods never ask opens no watch.
// The anchors it returns are PEM CERTIFICATE blocks, each certificate
// once, however many bundles carry it.
//
// Where it departs from upstream, and why:
//   - only certificates.k8s.io/v1 (the API the course's control plane
//     serves; upstream asks discovery and falls back to v1beta1, v1alpha1);
//   - the anchors are in the order of their DER bytes, computed on every
//     call: upstream sorts them too, then shuffles the list, and keeps
//     the result five minutes in a cache the informer's events clear (so
//     that no reader comes to rely on an order); here the same bundles
//     always give the same file, and a file is rewritten only when a
//     bundle changed.
package clustertrustbundle

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
)

// maxLabelSelectorLength is upstream's bound on a selector's string form.
const maxLabelSelectorLength = 100 * 1024

// syncTimeout is how long the first call waits for the informer's list
// (upstream's: 10 seconds); a later call finds it synced or fails fast.
const syncTimeout = 10 * time.Second

// Manager gives the trust anchors a clusterTrustBundle projection asks for.
type Manager interface {
	// GetTrustAnchorsByName is the named bundle's anchors; allowMissing:
	// no bundle of that name gives none (an empty file), not an error.
	GetTrustAnchorsByName(name string, allowMissing bool) ([]byte, error)
	// GetTrustAnchorsBySigner is the anchors of every bundle of
	// signerName that labelSelector matches: a nil selector matches no
	// bundle, an empty one every bundle of the signer. allowMissing: no
	// bundle matching gives none, not an error.
	GetTrustAnchorsBySigner(signerName string, labelSelector *metav1.LabelSelector, allowMissing bool) ([]byte, error)
}

// InformerManager is the Manager with an informer on every
// ClusterTrustBundle, with the node's credentials.
type InformerManager struct {
	ctx    context.Context
	client kubernetes.Interface

	once     sync.Once
	lister   certlisters.ClusterTrustBundleLister
	informer cache.SharedIndexInformer
}

var _ Manager = (*InformerManager)(nil)

// NewInformerManager returns a manager whose informer, once the first
// call starts it, runs until ctx ends. client has the node's credentials.
func NewInformerManager(ctx context.Context, client kubernetes.Interface) *InformerManager {
	return &InformerManager{ctx: ctx, client: client}
}

// start starts the informer on the first call and waits for its list,
// at most syncTimeout; an informer not synced yet is an error (upstream's
// words), the next call asks again.
func (m *InformerManager) start() error {
	m.once.Do(func() {
		f := informers.NewSharedInformerFactory(m.client, 0)
		ctbs := f.Certificates().V1().ClusterTrustBundles()
		m.informer, m.lister = ctbs.Informer(), ctbs.Lister()
		f.Start(m.ctx.Done())
		ctx, cancel := context.WithTimeout(m.ctx, syncTimeout)
		defer cancel()
		cache.WaitForCacheSync(ctx.Done(), m.informer.HasSynced)
	})
	if !m.informer.HasSynced() {
		return errors.New("ClusterTrustBundle informer has not yet synced")
	}
	return nil
}

func (m *InformerManager) GetTrustAnchorsByName(name string, allowMissing bool) ([]byte, error) {
	if err := m.start(); err != nil {
		return nil, err
	}
	ctb, err := m.lister.Get(name)
	if apierrors.IsNotFound(err) && allowMissing {
		return []byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("while getting ClusterTrustBundle: %w", err)
	}
	return normalizeTrustAnchors([]*certificatesv1.ClusterTrustBundle{ctb}), nil
}

func (m *InformerManager) GetTrustAnchorsBySigner(signerName string, labelSelector *metav1.LabelSelector, allowMissing bool) ([]byte, error) {
	if err := m.start(); err != nil {
		return nil, err
	}
	// metav1's conversion is the one that makes nil match nothing and
	// an empty selector match everything.
	selector, err := metav1.LabelSelectorAsSelector(labelSelector)
	if err != nil {
		return nil, fmt.Errorf("while parsing label selector: %w", err)
	}
	if n := len(selector.String()); n > maxLabelSelectorLength {
		return nil, fmt.Errorf("label selector length (%d) is larger than %d", n, maxLabelSelectorLength)
	}
	all, err := m.lister.List(selector)
	if err != nil {
		return nil, fmt.Errorf("while listing ClusterTrustBundles matching label selector %v: %w", labelSelector, err)
	}
	var ctbs []*certificatesv1.ClusterTrustBundle
	for _, ctb := range all {
		if ctb.Spec.SignerName == signerName {
			ctbs = append(ctbs, ctb)
		}
	}
	if len(ctbs) == 0 {
		if allowMissing {
			return []byte{}, nil
		}
		return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
	}
	return normalizeTrustAnchors(ctbs), nil
}

// normalizeTrustAnchors is the bundles' certificates, each once, in the
// order of their DER bytes, as PEM. What is not a PEM block between them
// (comments, blank lines) is dropped; the API server accepts a bundle
// only if every block is a CERTIFICATE.
func normalizeTrustAnchors(ctbs []*certificatesv1.ClusterTrustBundle) []byte {
	var ders []string
	for _, ctb := range ctbs {
		rest := []byte(ctb.Spec.TrustBundle)
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			ders = append(ders, string(b.Bytes))
		}
	}
	slices.Sort(ders)
	out := []byte{}
	for _, der := range slices.Compact(ders) {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(der)})...)
	}
	return out
}
