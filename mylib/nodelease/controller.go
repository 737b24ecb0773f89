// Package nodelease keeps a node's Lease in the kube-node-lease namespace
// fresh: the heartbeat the node lifecycle controller watches to decide that a
// node is alive.
//
// The real kubelet uses the lease controller of
// k8s.io/component-helpers/apimachinery/lease (controller.go), wired up in
// pkg/kubelet/kubelet.go. This is a smaller version with the same behaviour:
//
//   - the Lease is named after the node, holderIdentity is the node name;
//   - it is renewed every RenewInterval (0.25 × leaseDurationSeconds: 10 s for
//     the default 40 s);
//   - when the Lease cannot be read or created, it retries with a backoff that
//     starts at 200 ms and doubles up to 7 s;
//   - a missing Lease is created, with an owner reference to the Node so that
//     deleting the Node deletes its Lease;
//   - on shutdown the Lease is left alone: it expires, and that is how the
//     control plane learns that the node is gone.
//
// Wiring:
//
//	c, err := nodelease.NewController(nodelease.Config{Client: cs, NodeName: "n1"})
//	if err != nil { … }
//	go c.Run(ctx) // returns when ctx is cancelled
package nodelease

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Upstream's defaults (kubelet config nodeLeaseDurationSeconds, and the
// constants of the component-helpers lease controller).
const (
	// DefaultLeaseDurationSeconds is the kubelet's nodeLeaseDurationSeconds.
	DefaultLeaseDurationSeconds int32 = 40
	// RenewIntervalFraction is the kubelet's nodeLeaseRenewIntervalFraction:
	// the lease is renewed every 0.25 × its duration.
	RenewIntervalFraction = 0.25
	// InitialBackoff is the first wait after a failed attempt to get or
	// create the lease; each further failure doubles it.
	InitialBackoff = 200 * time.Millisecond
	// MaxBackoff caps the wait between attempts.
	MaxBackoff = 7 * time.Second
	// MaxUpdateRetries is how many updates are tried in a row before the
	// controller waits for the next renewal.
	MaxUpdateRetries = 5
)

// RenewInterval returns how often a lease of the given duration is renewed.
func RenewInterval(leaseDurationSeconds int32) time.Duration {
	return time.Duration(float64(time.Duration(leaseDurationSeconds)*time.Second) * RenewIntervalFraction)
}

// Config says which lease to keep and how.
type Config struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// NodeName names the Lease and is its holderIdentity. Required.
	NodeName string
	// LeaseDurationSeconds is written into the Lease; zero means
	// DefaultLeaseDurationSeconds.
	LeaseDurationSeconds int32
	// RenewInterval is the time between renewals; zero means
	// RenewInterval(LeaseDurationSeconds).
	RenewInterval time.Duration
	// Clock is used for every wait and for renewTime; nil means the real clock.
	Clock clock.Clock
	// OnRenewed, when set, is called after every successful create or update
	// with the Lease the API server returned (the chapters print it).
	OnRenewed func(lease *coordinationv1.Lease, created bool)
	// OnRepeatedHeartbeatFailure, when set, is called when an update of the
	// Lease fails again in the same renewal (not on a conflict), as upstream:
	// give it HeartbeatClient.CloseAllConns so the next try dials afresh.
	OnRepeatedHeartbeatFailure func()
}

// Controller creates and renews one node's Lease.
type Controller struct {
	client                     kubernetes.Interface
	nodeName                   string
	leaseDuration              int32
	renewInterval              time.Duration
	clock                      clock.Clock
	onRenewed                  func(*coordinationv1.Lease, bool)
	onRepeatedHeartbeatFailure func()

	// latestLease is the Lease as the API server last returned it. Renewals
	// update this copy directly, saving a GET each time (upstream does the
	// same); only when that fails does the controller read the Lease again.
	latestLease *coordinationv1.Lease
}

// NewController checks cfg and returns a Controller; call Run to start it.
func NewController(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("nodelease: Config.Client is required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("nodelease: Config.NodeName is required")
	}
	if cfg.LeaseDurationSeconds == 0 {
		cfg.LeaseDurationSeconds = DefaultLeaseDurationSeconds
	}
	if cfg.LeaseDurationSeconds < 0 {
		return nil, fmt.Errorf("nodelease: lease duration must be positive, got %ds", cfg.LeaseDurationSeconds)
	}
	if cfg.RenewInterval == 0 {
		cfg.RenewInterval = RenewInterval(cfg.LeaseDurationSeconds)
	}
	if cfg.RenewInterval <= 0 || cfg.RenewInterval >= time.Duration(cfg.LeaseDurationSeconds)*time.Second {
		return nil, fmt.Errorf("nodelease: renew interval %v must be positive and shorter than the lease duration %ds", cfg.RenewInterval, cfg.LeaseDurationSeconds)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Controller{
		client:                     cfg.Client,
		nodeName:                   cfg.NodeName,
		leaseDuration:              cfg.LeaseDurationSeconds,
		renewInterval:              cfg.RenewInterval,
		clock:                      cfg.Clock,
		onRenewed:                  cfg.OnRenewed,
		onRepeatedHeartbeatFailure: cfg.OnRepeatedHeartbeatFailure,
	}, nil
}

// RenewInterval is the time between two renewals.
func (c *Controller) RenewInterval() time.Duration { return c.renewInterval }

// LeaseDurationSeconds is the duration written into the Lease.
func (c *Controller) LeaseDurationSeconds() int32 { return c.leaseDuration }

// Run renews the lease at once and then every RenewInterval until ctx is
// cancelled. It does not delete the lease when it returns: like the kubelet,
// it lets the lease expire.
func (c *Controller) Run(ctx context.Context) {
	klog.FromContext(ctx).V(2).Info("Starting node lease controller", "lease", klog.KRef(corev1.NamespaceNodeLease, c.nodeName), "renewInterval", c.renewInterval)
	for {
		c.sync(ctx)
		// The interval counts from the end of a sync, as upstream's
		// "sliding" wait.JitterUntil does (upstream also adds up to 4 %
		// random jitter, left out here).
		t := c.clock.NewTimer(c.renewInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Sync renews the lease once, creating it first if needed: what Run does
// every RenewInterval. It is for a caller that schedules the renewals itself
// (many leases in one process, each renewed from a timer rather than from a
// goroutine of its own); it must not run concurrently with Run or with
// itself.
func (c *Controller) Sync(ctx context.Context) { c.sync(ctx) }

// sync renews the lease once, creating it first if needed.
func (c *Controller) sync(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	logger := klog.FromContext(ctx)
	if c.latestLease != nil {
		// Fast path: update the copy we already have, no GET.
		if err := c.retryUpdateLease(ctx, c.latestLease); err == nil {
			return
		} else if ctx.Err() != nil {
			return
		} else {
			logger.Info("Failed to update lease using latest lease, falling back to ensure lease", "err", err)
		}
	}
	lease, created := c.backoffEnsureLease(ctx)
	c.latestLease = lease
	if lease != nil && !created {
		if err := c.retryUpdateLease(ctx, lease); err != nil && ctx.Err() == nil {
			logger.Error(err, "Will retry updating lease", "interval", c.renewInterval)
		}
	}
}

// backoffEnsureLease gets the lease, creating it when it is missing, and
// retries failures with a growing wait: 200 ms, 400 ms, 800 ms, … up to
// MaxBackoff. It returns the lease and whether this call created it, or nil
// when ctx is cancelled.
func (c *Controller) backoffEnsureLease(ctx context.Context) (*coordinationv1.Lease, bool) {
	wait := InitialBackoff
	for {
		lease, created, err := c.ensureLease(ctx)
		if err == nil {
			return lease, created
		}
		if ctx.Err() != nil {
			return nil, false // stopped mid-request
		}
		klog.FromContext(ctx).Error(err, "Failed to ensure lease exists, will retry", "interval", wait)
		t := c.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, false
		case <-t.C():
		}
		wait = min(2*wait, MaxBackoff)
	}
}

// ensureLease returns the lease, creating it when it does not exist. A nil
// lease with a nil error means "could not build the lease now, try at the
// next renewal" (the owner reference could not be set).
func (c *Controller) ensureLease(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	leases := c.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	lease, err := leases.Get(ctx, c.nodeName, metav1.GetOptions{})
	switch {
	case err == nil:
		return lease, false, nil
	case !apierrors.IsNotFound(err):
		return nil, false, fmt.Errorf("get lease %s/%s: %w", corev1.NamespaceNodeLease, c.nodeName, err)
	}
	newLease, err := c.newLease(ctx, nil)
	if err != nil {
		// Upstream does not create a lease without its owner reference;
		// the next renewal tries again.
		klog.FromContext(ctx).Error(err, "Not creating the lease yet", "lease", klog.KRef(corev1.NamespaceNodeLease, c.nodeName))
		return nil, false, nil
	}
	lease, err = leases.Create(ctx, newLease, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("create lease %s/%s: %w", corev1.NamespaceNodeLease, c.nodeName, err)
	}
	c.renewed(lease, true)
	return lease, true, nil
}

// retryUpdateLease writes a fresh renewTime into base, up to
// MaxUpdateRetries times. On a conflict (someone else changed the lease) it
// reads the lease again before the next try.
func (c *Controller) retryUpdateLease(ctx context.Context, base *coordinationv1.Lease) error {
	leases := c.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	var lastErr error
	for i := range MaxUpdateRetries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if base == nil {
			return fmt.Errorf("update lease %s/%s: lease could not be read: %w", corev1.NamespaceNodeLease, c.nodeName, lastErr)
		}
		// An error here (no owner reference yet) must not stop the renewal:
		// the heartbeat matters more than the owner reference.
		toUpdate, _ := c.newLease(ctx, base)
		lease, err := leases.Update(ctx, toUpdate, metav1.UpdateOptions{})
		if err == nil {
			c.latestLease = lease
			c.renewed(lease, false)
			return nil
		}
		if ctx.Err() != nil {
			// Stopped mid-request: a shutdown, not a failed heartbeat.
			// (Upstream logs it as a failure too; a node that stops says
			// nothing here.)
			return ctx.Err()
		}
		lastErr = fmt.Errorf("update lease %s/%s: %w", corev1.NamespaceNodeLease, c.nodeName, err)
		klog.FromContext(ctx).Error(err, "Failed to update lease", "lease", klog.KRef(corev1.NamespaceNodeLease, c.nodeName))
		if apierrors.IsConflict(err) {
			base, _ = c.backoffEnsureLease(ctx)
			continue
		}
		if i > 0 && c.onRepeatedHeartbeatFailure != nil {
			c.onRepeatedHeartbeatFailure()
		}
	}
	return fmt.Errorf("failed %d attempts to update lease: %w", MaxUpdateRetries, lastErr)
}

// newLease returns the lease to write: a new one when base is nil, else a
// copy of base. Either way it carries the holder, the duration, renewTime =
// now and the owner reference to the Node. The returned error says the owner
// reference could not be set; the lease is still usable for an update.
func (c *Controller) newLease(ctx context.Context, base *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	var lease *coordinationv1.Lease
	if base == nil {
		holder := c.nodeName
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: c.nodeName, Namespace: corev1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}
	} else {
		lease = base.DeepCopy()
	}
	duration := c.leaseDuration
	lease.Spec.LeaseDurationSeconds = &duration
	lease.Spec.RenewTime = &metav1.MicroTime{Time: c.clock.Now()}
	return lease, c.setNodeOwnerRef(ctx, lease)
}

// setNodeOwnerRef makes the Node the owner of its Lease, as the kubelet's
// SetNodeOwnerFunc (pkg/kubelet/util/nodelease.go) does: it needs the Node's
// UID, so it reads the Node until the reference is set.
func (c *Controller) setNodeOwnerRef(ctx context.Context, lease *coordinationv1.Lease) error {
	if len(lease.OwnerReferences) > 0 {
		return nil
	}
	node, err := c.client.CoreV1().Nodes().Get(ctx, c.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s for the lease's owner reference: %w", c.nodeName, err)
	}
	lease.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: corev1.SchemeGroupVersion.Version, // "v1"
		Kind:       "Node",
		Name:       c.nodeName,
		UID:        node.UID,
	}}
	return nil
}

func (c *Controller) renewed(lease *coordinationv1.Lease, created bool) {
	if c.onRenewed != nil {
		c.onRenewed(lease, created)
	}
}
