// Package podcertificate is upstream's pkg/kubelet/podcertificate: the
// private key and certificate chain of a projected volume's
// podCertificate source. For each such source of a pod the kubelet
// generates a key of the source's keyType, files a PodCertificateRequest
// (certificates.k8s.io/v1) for it with the node's own credentials, waits
// for the source's signer to issue it, and, from the certificate's
// beginRefreshAt on, files a new request with a new key, serving the old
// chain until the new one is issued. Until the first is issued the
// manager answers an error, so the volume does not mount and the pod
// stays ContainerCreating; a request the signer denies or fails is
// final for that source (the pod never starts), as upstream.
//
// Each source is a small state machine, as upstream's IssuingManager:
//
//	initial ──► wait ──► fresh ──► waitRefresh ──► fresh …
//	             │                     │
//	             └──► denied / failed ◄┘
//
// Where it departs from upstream, and why:
//   - no work queue, no refresh pass: the machine takes its steps when
//     the volume asks for the bundle (GetPodCertificateCredentialBundle),
//     and the kubelet sets every projected volume up again at each sync
//     of its pod, so a certificate is refreshed within a sync of its
//     beginRefreshAt (upstream's pass runs every minute, its queue reacts
//     to each PodCertificateRequest event);
//   - the kubelet does not call TrackPod (the volume's first set-up
//     files the request), and ForgetPod is called when the pod's
//     projected volume is torn down (upstream's kubelet calls both as
//     pods come and go);
//   - GetPodCertificateCredentialBundle is given the pod (upstream's is
//     given its namespace, name and UID and finds it in the pod manager);
//   - only certificates.k8s.io/v1 (the API the course's control plane
//     serves; upstream v1.37 also speaks v1beta1, whose
//     pkixPublicKey/proofOfPossession the v1 stubPKCS10Request replaces:
//     an empty PKCS#10 request the key signs);
//   - no events (denied, failed, overdue, expired) and no metrics;
//   - the node's UID is read from the API when a request is filed
//     (upstream keeps a Node informer).
package podcertificate

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// assumeDeletedThreshold is upstream's: a request filed this long ago
// that the informer still does not show was deleted; file another.
const assumeDeletedThreshold = 10 * time.Minute

// syncTimeout is how long the first call waits for the informer's list.
const syncTimeout = 10 * time.Second

// ErrNotIssuedYet is the answer until the signer issues the first
// certificate (upstream's words).
var ErrNotIssuedYet = errors.New("credential bundle is not issued yet")

// Manager gives a podCertificate projection its key and chain.
type Manager interface {
	// TrackPod files the requests of the pod's podCertificate sources
	// that have none yet.
	TrackPod(ctx context.Context, pod *v1.Pod)
	// ForgetPod drops the pod's keys and chains.
	ForgetPod(ctx context.Context, pod *v1.Pod)
	// GetPodCertificateCredentialBundle is the PEM private key (PKCS#8)
	// and certificate chain of the pod's volume's source at sourceIndex.
	GetPodCertificateCredentialBundle(ctx context.Context, pod *v1.Pod, volumeName string, sourceIndex int) (privKey, certChain []byte, err error)
}

type projectionKey struct {
	PodUID      types.UID
	VolumeName  string
	SourceIndex int
}

// credState is one projection's state; the zero value is initial.
type credState struct {
	phase string // "", "wait", "fresh", "waitRefresh", "denied", "failed"

	privateKey, certChain []byte // the chain being served (fresh, waitRefresh)
	beginRefreshAt        time.Time

	pendingKey     []byte // the key of the request being waited on
	pcrName        string
	pcrAbandonAt   time.Time
	reason, detail string // denied, failed
}

// IssuingManager is the Manager filing PodCertificateRequests with the
// node's client.
type IssuingManager struct {
	ctx      context.Context
	client   kubernetes.Interface
	nodeName types.NodeName
	clock    clock.PassiveClock
	// Jitter is added to each beginRefreshAt, so that the node's pods do
	// not all refresh at once; nil: upstream's, random up to 5 minutes.
	Jitter func() time.Duration

	once     sync.Once
	informer cache.SharedIndexInformer
	lister   certlisters.PodCertificateRequestLister

	mu     sync.Mutex
	states map[projectionKey]*credState
}

var _ Manager = (*IssuingManager)(nil)

// NewIssuingManager returns a manager for node nodeName whose informer
// (on the node's PodCertificateRequests), once the first call starts it,
// runs until ctx ends. client has the node's credentials.
func NewIssuingManager(ctx context.Context, client kubernetes.Interface, nodeName types.NodeName, clk clock.PassiveClock) *IssuingManager {
	return &IssuingManager{ctx: ctx, client: client, nodeName: nodeName, clock: clk, states: map[projectionKey]*credState{}}
}

func (m *IssuingManager) start() error {
	m.once.Do(func() {
		f := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", string(m.nodeName)).String()
		}))
		pcrs := f.Certificates().V1().PodCertificateRequests()
		m.informer, m.lister = pcrs.Informer(), pcrs.Lister()
		f.Start(m.ctx.Done())
		ctx, cancel := context.WithTimeout(m.ctx, syncTimeout)
		defer cancel()
		cache.WaitForCacheSync(ctx.Done(), m.informer.HasSynced)
	})
	if !m.informer.HasSynced() {
		return errors.New("PodCertificateRequest informer has not yet synced")
	}
	return nil
}

func (m *IssuingManager) jitter() time.Duration {
	if m.Jitter != nil {
		return m.Jitter()
	}
	return time.Duration(mathrand.Int64N(int64(5 * time.Minute)))
}

func (m *IssuingManager) TrackPod(ctx context.Context, pod *v1.Pod) {
	for _, vol := range pod.Spec.Volumes {
		if vol.Projected == nil {
			continue
		}
		for i, src := range vol.Projected.Sources {
			if src.PodCertificate != nil {
				_, _, _ = m.GetPodCertificateCredentialBundle(ctx, pod, vol.Name, i)
			}
		}
	}
}

func (m *IssuingManager) ForgetPod(_ context.Context, pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.states {
		if k.PodUID == pod.UID {
			delete(m.states, k)
		}
	}
}

func (m *IssuingManager) GetPodCertificateCredentialBundle(ctx context.Context, pod *v1.Pod, volumeName string, sourceIndex int) ([]byte, []byte, error) {
	var src *v1.PodCertificateProjection
	for _, vol := range pod.Spec.Volumes {
		if vol.Name == volumeName && vol.Projected != nil && sourceIndex < len(vol.Projected.Sources) {
			src = vol.Projected.Sources[sourceIndex].PodCertificate
		}
	}
	if src == nil {
		return nil, nil, fmt.Errorf("pod %s/%s has no podCertificate source %d in volume %q", pod.Namespace, pod.Name, sourceIndex, volumeName)
	}
	if err := m.start(); err != nil {
		return nil, nil, err
	}
	// One lock for all: a step files at most one request, and a node
	// has few such sources.
	m.mu.Lock()
	defer m.mu.Unlock()
	key := projectionKey{PodUID: pod.UID, VolumeName: volumeName, SourceIndex: sourceIndex}
	s := m.states[key]
	if s == nil {
		s = &credState{}
		m.states[key] = s
	}
	// Steps until one changes nothing: initial files, wait may find it
	// issued, fresh may be due for refresh at once.
	for range 4 {
		changed, err := m.step(ctx, pod, src, s)
		if err != nil {
			return nil, nil, err
		}
		if !changed {
			break
		}
	}
	switch s.phase {
	case "fresh", "waitRefresh":
		return s.privateKey, s.certChain, nil
	case "denied":
		return nil, nil, fmt.Errorf("PodCertificateRequest was permanently denied: reason=%q message=%q", s.reason, s.detail)
	case "failed":
		return nil, nil, fmt.Errorf("PodCertificateRequest was permanently failed: reason=%q message=%q", s.reason, s.detail)
	}
	return nil, nil, ErrNotIssuedYet
}

// step takes one transition of s, if one is due; changed says it did.
func (m *IssuingManager) step(ctx context.Context, pod *v1.Pod, src *v1.PodCertificateProjection, s *credState) (bool, error) {
	switch s.phase {
	case "":
		if err := m.file(ctx, pod, src, s); err != nil {
			return false, fmt.Errorf("while creating initial PodCertificateRequest: %w", err)
		}
		s.phase = "wait"
		return true, nil
	case "fresh":
		if m.clock.Now().Before(s.beginRefreshAt) {
			return false, nil
		}
		if err := m.file(ctx, pod, src, s); err != nil {
			return false, fmt.Errorf("while creating refresh PodCertificateRequest: %w", err)
		}
		s.phase = "waitRefresh"
		return true, nil
	case "wait", "waitRefresh":
		pcr, err := m.lister.PodCertificateRequests(pod.Namespace).Get(s.pcrName)
		if apierrors.IsNotFound(err) {
			if m.clock.Now().After(s.pcrAbandonAt) {
				// Deleted (or never seen): file again.
				if s.phase == "wait" {
					s.phase = ""
				} else {
					s.phase = "fresh"
				}
				return true, nil
			}
			return false, nil // the informer has not seen it yet
		}
		if err != nil {
			return false, fmt.Errorf("while getting PodCertificateRequest %s/%s: %w", pod.Namespace, s.pcrName, err)
		}
		for _, c := range pcr.Status.Conditions {
			switch c.Type {
			case certificatesv1.PodCertificateRequestConditionTypeDenied:
				*s = credState{phase: "denied", reason: c.Reason, detail: c.Message}
				return true, nil
			case certificatesv1.PodCertificateRequestConditionTypeFailed:
				*s = credState{phase: "failed", reason: c.Reason, detail: c.Message}
				return true, nil
			case certificatesv1.PodCertificateRequestConditionTypeIssued:
				var refreshAt time.Time
				if pcr.Status.BeginRefreshAt != nil {
					refreshAt = pcr.Status.BeginRefreshAt.Time
				}
				*s = credState{phase: "fresh", privateKey: s.pendingKey,
					certChain:      CleanCertificateChain([]byte(pcr.Status.CertificateChain)),
					beginRefreshAt: refreshAt.Add(m.jitter())}
				return true, nil
			}
		}
	}
	return false, nil // pending, denied, failed
}

// file generates a key and files a request for it, as s's pending one.
func (m *IssuingManager) file(ctx context.Context, pod *v1.Pod, src *v1.PodCertificateProjection, s *credState) error {
	sa, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("while fetching service account: %w", err)
	}
	node, err := m.client.CoreV1().Nodes().Get(ctx, string(m.nodeName), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("while getting node object: %w", err)
	}
	keyPEM, pcr, err := NewPodCertificateRequest(pod, sa.UID, m.nodeName, node.UID, src)
	if err != nil {
		return err
	}
	pcr, err = m.client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, pcr, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("while creating on API: %w", err)
	}
	created := pcr.CreationTimestamp.Time
	if created.IsZero() { // a fake clientset's
		created = m.clock.Now()
	}
	s.pendingKey, s.pcrName, s.pcrAbandonAt = keyPEM, pcr.Name, created.Add(assumeDeletedThreshold+m.jitter())
	return nil
}

// NewPodCertificateRequest generates a key of src's keyType and the
// request for it, owned by the pod: its PEM (PKCS#8) private key and the
// request to create.
func NewPodCertificateRequest(pod *v1.Pod, serviceAccountUID types.UID, nodeName types.NodeName, nodeUID types.UID, src *v1.PodCertificateProjection) ([]byte, *certificatesv1.PodCertificateRequest, error) {
	priv, err := GenerateKey(src.KeyType)
	if err != nil {
		return nil, nil, fmt.Errorf("while generating keypair: %w", err)
	}
	// The stub request: no subject, no extensions; the API server checks
	// its signature, the key's proof of possession.
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("while creating stub PKCS#10 request: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("while marshaling private key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return keyPEM, &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "core/v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: src.SignerName,
			PodName:    pod.Name, PodUID: pod.UID,
			ServiceAccountName: pod.Spec.ServiceAccountName, ServiceAccountUID: serviceAccountUID,
			NodeName: nodeName, NodeUID: nodeUID,
			MaxExpirationSeconds:      src.MaxExpirationSeconds,
			StubPKCS10Request:         stub,
			UnverifiedUserAnnotations: src.UserAnnotations,
		},
	}, nil
}

// GenerateKey generates a private key of one of the API's key types.
func GenerateKey(keyType string) (crypto.Signer, error) {
	switch keyType {
	case "RSA3072":
		return rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		return rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	}
	return nil, fmt.Errorf("unknown key type %q", keyType)
}

// CleanCertificateChain is the chain's CERTIFICATE blocks alone, without
// headers or the text between them.
func CleanCertificateChain(in []byte) []byte {
	var out []byte
	for {
		var b *pem.Block
		if b, in = pem.Decode(in); b == nil {
			return out
		}
		if b.Type == "CERTIFICATE" {
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
		}
	}
}
