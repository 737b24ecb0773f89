// The node half of the Kubelet: register the Node with the API server (or
// adopt the one that is already there), keep its status up to date, and
// renew its Lease, the way pkg/kubelet/kubelet_node_status.go does. The
// Lease (mylib/nodelease) is the heartbeat, so the status is written only
// when it changes, or every NodeStatusReportFrequency (5 min) otherwise.

package kubelet

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"mykubelet/mylib/nodelease"
	"mykubelet/mylib/nodestatus"
)

// Upstream's defaults (kubelet configuration fields of the same names).
const (
	// DefaultNodeStatusUpdateFrequency is how often the kubelet computes the
	// node status (nodeStatusUpdateFrequency).
	DefaultNodeStatusUpdateFrequency = 10 * time.Second
	// DefaultNodeStatusReportFrequency is how often the kubelet writes the
	// status when nothing changed (nodeStatusReportFrequency).
	DefaultNodeStatusReportFrequency = 5 * time.Minute
	// NodeStatusUpdateRetry is how many times one sync tries to write.
	NodeStatusUpdateRetry = 5
	// ControllerManagedAttachAnnotation tells the attach/detach controller
	// that it, not the kubelet, attaches this node's volumes. The kubelet
	// sets it by default (--enable-controller-attach-detach).
	ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"
	// KubeletVersion is what mykubelet reports as status.nodeInfo.kubeletVersion
	// (the VERSION column of kubectl get nodes): the Kubernetes version it
	// follows, marked as not the real kubelet.
	KubeletVersion = "v1.37.1-mykubelet"
)

// NodeConfig is the node half's part of Config: the Node to register, how
// to keep its status, and its Lease.
type NodeConfig struct {
	// Hostname is the kubernetes.io/hostname label; default the node name.
	Hostname string
	// Labels are extra labels for a new node (the kubelet's --node-labels).
	Labels map[string]string
	// Annotations are extra annotations for the node: set on a new node and,
	// at registration, written onto an existing one whose values differ, so
	// that the last program to register a node leaves its mark (e.g.
	// options.NodeAnnotations: which program runs as the node, read by an
	// instructor's status view). Upstream has no such field: its only
	// registration annotation is the attach/detach one.
	Annotations map[string]string
	// Setters fill in the status, in order (upstream: defaultNodeStatusFuncs).
	// Required unless Status is set.
	Setters []nodestatus.Setter
	// Status, when Setters is empty, builds upstream's default setters,
	// with the runtime's version and health from the pod half.
	Status *NodeStatusOptions
	// NodeStatusUpdateFrequency: zero means DefaultNodeStatusUpdateFrequency.
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency: zero means DefaultNodeStatusReportFrequency.
	NodeStatusReportFrequency time.Duration
	// LeaseDurationSeconds is the Lease's duration; zero means
	// nodelease.DefaultLeaseDurationSeconds. It is renewed every quarter of it.
	LeaseDurationSeconds int32
	// HeartbeatClient renews the Lease and writes the node status (upstream:
	// Dependencies.HeartbeatClient): build it with
	// nodelease.NewHeartbeatClient, whose requests time out after
	// NodeStatusUpdateFrequency. Nil means Config.Client, which has no timeout.
	HeartbeatClient kubernetes.Interface
	// OnHeartbeatFailure is called when a Lease or status write fails again
	// within one sync (upstream: Dependencies.OnHeartbeatFailure): give it
	// HeartbeatClient.CloseAllConns, so the next write dials afresh.
	OnHeartbeatFailure func()
	// DisableNodeLease runs no lease controller: the kubelet before v1.14
	// (the NodeLease feature gate off), whose only heartbeat was the status
	// written every NodeStatusUpdateFrequency. Set NodeStatusReportFrequency
	// to NodeStatusUpdateFrequency with it to get that behaviour.
	DisableNodeLease bool

	// Recorder receives the node's events (Starting, NodeHasSufficientMemory,
	// NodeReady, …; events.NewRecorder); nil means PodsConfig.Recorder,
	// and without either the events are not recorded (a fleet's nodes).
	Recorder record.EventRecorder

	// OnRegistered, when set, is called once the node is registered: created
	// is false when an existing Node was adopted.
	OnRegistered func(node *v1.Node, created bool)
	// OnStatusPatched, when set, is called after every status write with the
	// stored node, the patch sent and why it was sent.
	OnStatusPatched func(node *v1.Node, patch []byte, reason string)
	// OnLeaseRenewed, when set, is called after every Lease create or update.
	OnLeaseRenewed func(lease *coordinationv1.Lease, created bool)
}

// nodeHalf is the state of the node half. SyncNodeStatus is not safe for
// concurrent use: it runs from one goroutine (RunNode's status loop).
type nodeHalf struct {
	hostname                  string
	labels                    map[string]string
	annotations               map[string]string
	setters                   []nodestatus.Setter
	nodeStatusUpdateFrequency time.Duration
	nodeStatusReportFrequency time.Duration
	onRegistered              func(*v1.Node, bool)
	onStatusPatched           func(*v1.Node, []byte, string)
	nodeLeaseController       *nodelease.Controller // nil with DisableNodeLease
	heartbeatClient           kubernetes.Interface
	onHeartbeatFailure        func()
	recorder                  record.EventRecorder // nil: the pod half's

	registrationCompleted bool
	// lastStatusReportTime is when the status was last written.
	lastStatusReportTime time.Time
}

// newNodeHalf checks the node half's config.
func (kl *Kubelet) newNodeHalf(cfg NodeConfig) error {
	if len(cfg.Setters) == 0 && cfg.Status != nil {
		if cfg.Status.RootDir == "" {
			return errors.New("kubelet: Config.Node.Status.RootDir is required (the filesystem of ephemeral-storage)")
		}
		cfg.Setters = kl.defaultNodeStatusFuncs(*cfg.Status)
	}
	if len(cfg.Setters) == 0 {
		return errors.New("kubelet: Config.Node.Setters or Config.Node.Status is required (at least the conditions)")
	}
	if cfg.Hostname == "" {
		cfg.Hostname = kl.nodeName
	}
	if cfg.NodeStatusUpdateFrequency == 0 {
		cfg.NodeStatusUpdateFrequency = DefaultNodeStatusUpdateFrequency
	}
	if cfg.NodeStatusReportFrequency == 0 {
		cfg.NodeStatusReportFrequency = DefaultNodeStatusReportFrequency
	}
	if cfg.NodeStatusUpdateFrequency < 0 || cfg.NodeStatusReportFrequency < cfg.NodeStatusUpdateFrequency {
		return fmt.Errorf("kubelet: need 0 < nodeStatusUpdateFrequency (%v) <= nodeStatusReportFrequency (%v)", cfg.NodeStatusUpdateFrequency, cfg.NodeStatusReportFrequency)
	}
	if cfg.HeartbeatClient == nil {
		cfg.HeartbeatClient = kl.client
	}
	var lc *nodelease.Controller
	if !cfg.DisableNodeLease {
		var err error
		lc, err = nodelease.NewController(nodelease.Config{
			Client:                     cfg.HeartbeatClient,
			NodeName:                   kl.nodeName,
			LeaseDurationSeconds:       cfg.LeaseDurationSeconds,
			Clock:                      kl.clock,
			OnRenewed:                  cfg.OnLeaseRenewed,
			OnRepeatedHeartbeatFailure: cfg.OnHeartbeatFailure,
		})
		if err != nil {
			return err
		}
	}
	kl.node = &nodeHalf{
		hostname:                  cfg.Hostname,
		labels:                    cfg.Labels,
		annotations:               cfg.Annotations,
		setters:                   cfg.Setters,
		nodeStatusUpdateFrequency: cfg.NodeStatusUpdateFrequency,
		nodeStatusReportFrequency: cfg.NodeStatusReportFrequency,
		onRegistered:              cfg.OnRegistered,
		onStatusPatched:           cfg.OnStatusPatched,
		nodeLeaseController:       lc,
		heartbeatClient:           cfg.HeartbeatClient,
		onHeartbeatFailure:        cfg.OnHeartbeatFailure,
		recorder:                  cfg.Recorder,
	}
	return nil
}

// RunNode is the node half: it registers the node (returning the error when
// that cannot succeed, e.g. forbidden), then syncs the status every
// NodeStatusUpdateFrequency and renews the Lease, until ctx ends.
func (kl *Kubelet) RunNode(ctx context.Context) error {
	if kl.node == nil {
		return errors.New("kubelet: RunNode needs Config.Node")
	}
	if err := kl.RegisterWithAPIServer(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	var wg sync.WaitGroup
	if lc := kl.node.nodeLeaseController; lc != nil {
		wg.Go(func() { lc.Run(ctx) })
	}
	if kl.node.lastStatusReportTime.IsZero() {
		kl.waitForRuntimeReady(ctx)
	}
	wg.Go(func() { kl.syncNodeStatusLoop(ctx) })
	wg.Wait()
	return nil
}

// FirstReportWait bounds how long the first status report waits for the
// runtime's first good Status and the PLEG's first relist.
const FirstReportWait = 10 * time.Second

// waitForRuntimeReady waits, at most FirstReportWait, until RuntimeErrors
// says nothing, so that the first report of a healthy node says Ready=True
// rather than "PLEG is not healthy: pleg has yet to be successful" for the
// second before its first relist (the pod half starts beside this one; on
// a busy machine its first relist came after the first report). Upstream
// writes that first NotReady report and follows it with
// fastStatusUpdateOnce; a runtime that is really down is reported after
// the wait, as upstream would.
func (kl *Kubelet) waitForRuntimeReady(ctx context.Context) {
	if kl.runtimeState == nil {
		return
	}
	// Real time, not kl.clock: a test's fake clock stands still here, and
	// this wait is only the first report's, bounded.
	deadline := time.Now().Add(FirstReportWait)
	for kl.RuntimeErrors() != nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// LeaseRenewInterval is the time between two Lease renewals; zero with
// DisableNodeLease.
func (kl *Kubelet) LeaseRenewInterval() time.Duration {
	if kl.node.nodeLeaseController == nil {
		return 0
	}
	return kl.node.nodeLeaseController.RenewInterval()
}

// syncNodeStatusLoop syncs the node status at once and then every
// NodeStatusUpdateFrequency, until ctx is cancelled. Each sync registers the
// node first if that has not succeeded yet.
//
// A caller that wrote the first report itself with SyncNodeStatus, before
// it started the loops, gets no second sync at once: that sync would read
// the node back from the API server's watch cache, which may not have seen
// our write yet, so the status would look changed and be written again for
// nothing. Then the loop waits one period first.
func (kl *Kubelet) syncNodeStatusLoop(ctx context.Context) {
	syncNow := kl.node.lastStatusReportTime.IsZero()
	for {
		if syncNow {
			kl.SyncNodeStatus(ctx)
		}
		syncNow = true
		t := kl.clock.NewTimer(kl.node.nodeStatusUpdateFrequency)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// SyncNodeStatus registers the node if needed, then writes its status if it
// changed or NodeStatusReportFrequency has passed since the last write.
func (kl *Kubelet) SyncNodeStatus(ctx context.Context) {
	if err := kl.RegisterWithAPIServer(ctx); err != nil {
		if ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Unable to register node", "node", kl.nodeName)
		}
		return
	}
	if err := kl.updateNodeStatus(ctx); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "Unable to update node status", "node", kl.nodeName)
	}
}

// RegisterWithAPIServer creates the Node, or adopts and reconciles the one
// that exists. Like upstream it retries with a wait that doubles from 200 ms
// to 7 s; unlike upstream it gives up at once on errors that retrying cannot
// fix (forbidden, unauthorized, invalid), so that a learner with the wrong
// credentials sees one clear error. Once it succeeded it returns nil at once.
func (kl *Kubelet) RegisterWithAPIServer(ctx context.Context) error {
	if kl.node == nil {
		return errors.New("kubelet: registering the node needs Config.Node")
	}
	if kl.node.registrationCompleted {
		return nil
	}
	logger := klog.FromContext(ctx)
	step := 100 * time.Millisecond
	for {
		step = min(2*step, 7*time.Second)
		node, err := kl.InitialNode(ctx)
		if err != nil {
			return err
		}
		logger.V(2).Info("Attempting to register node", "node", kl.nodeName)
		err = kl.tryRegisterWithAPIServer(ctx, node)
		if err == nil {
			kl.node.registrationCompleted = true
			return nil
		}
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) {
			return err
		}
		logger.Error(err, "Unable to register node, will retry", "node", kl.nodeName, "interval", step)
		t := kl.clock.NewTimer(step)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// tryRegisterWithAPIServer makes one attempt: create the node; if it exists
// already, read it and reconcile it with node (labels, annotation, missing
// capacity), patching it only when something differs.
func (kl *Kubelet) tryRegisterWithAPIServer(ctx context.Context, node *v1.Node) error {
	nodes := kl.client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		kl.registered(created, true)
		return nil
	}
	// Forbidden can mean "you may not create nodes" while the node exists
	// and may be adopted, so it too goes on to read the node (upstream
	// does the same).
	if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("create node %s: %w", kl.nodeName, err)
	}
	existing, getErr := nodes.Get(ctx, kl.nodeName, metav1.GetOptions{})
	if getErr != nil {
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("create node %s: %w", kl.nodeName, err)
		}
		return fmt.Errorf("get existing node %s: %w", kl.nodeName, getErr)
	}
	original := existing.DeepCopy()
	requiresUpdate := reconcileCMADAnnotationWithExistingNode(node, existing)
	requiresUpdate = updateAnnotations(kl.node.annotations, existing) || requiresUpdate
	requiresUpdate = updateDefaultLabels(node, existing) || requiresUpdate
	requiresUpdate = updateDefaultResources(node, existing) || requiresUpdate
	if requiresUpdate {
		if existing, _, err = nodestatus.PatchNodeStatus(ctx, kl.client.CoreV1(), original, existing); err != nil {
			return fmt.Errorf("reconcile existing node %s: %w", kl.nodeName, err)
		}
	}
	kl.registered(existing, false)
	return nil
}

func (kl *Kubelet) registered(node *v1.Node, created bool) {
	klog.V(2).InfoS("Successfully registered node", "node", kl.nodeName, "created", created)
	if kl.node.onRegistered != nil {
		kl.node.onRegistered(node, created)
	}
}

// InitialNode is the Node this kubelet would create: name, the default
// labels (hostname, OS, architecture), Config.Labels, the controller-managed
// attach/detach annotation, Config.Annotations, and a status from the
// setters.
func (kl *Kubelet) InitialNode(ctx context.Context) (*v1.Node, error) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: kl.nodeName,
			Labels: map[string]string{
				v1.LabelHostname:          kl.node.hostname,
				v1.LabelOSStable:          goruntime.GOOS,
				v1.LabelArchStable:        goruntime.GOARCH,
				"beta.kubernetes.io/os":   goruntime.GOOS,
				"beta.kubernetes.io/arch": goruntime.GOARCH,
			},
			Annotations: map[string]string{ControllerManagedAttachAnnotation: "true"},
		},
	}
	for k, v := range kl.node.labels {
		node.Labels[k] = v
	}
	for k, v := range kl.node.annotations {
		node.Annotations[k] = v
	}
	kl.setNodeStatus(ctx, node)
	return node, nil
}

// defaultLabels are the labels the kubelet owns and corrects on an existing
// node.
var defaultLabels = []string{v1.LabelHostname, v1.LabelOSStable, v1.LabelArchStable, "beta.kubernetes.io/os", "beta.kubernetes.io/arch"}

// updateDefaultLabels copies the default labels from initial to existing and
// reports whether existing changed.
func updateDefaultLabels(initial, existing *v1.Node) bool {
	changed := false
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	for _, k := range defaultLabels {
		v, ok := initial.Labels[k]
		if !ok || existing.Labels[k] == v {
			continue
		}
		existing.Labels[k] = v
		changed = true
	}
	return changed
}

// reconcileCMADAnnotationWithExistingNode sets the attach/detach annotation
// on existing to the value in initial and reports whether it changed.
func reconcileCMADAnnotationWithExistingNode(initial, existing *v1.Node) bool {
	want, set := initial.Annotations[ControllerManagedAttachAnnotation]
	if existing.Annotations[ControllerManagedAttachAnnotation] == want {
		return false
	}
	if !set {
		delete(existing.Annotations, ControllerManagedAttachAnnotation)
		return true
	}
	if existing.Annotations == nil {
		existing.Annotations = map[string]string{}
	}
	existing.Annotations[ControllerManagedAttachAnnotation] = want
	return true
}

// updateAnnotations writes want onto existing's annotations and reports
// whether existing changed; annotations not in want stay.
func updateAnnotations(want map[string]string, existing *v1.Node) bool {
	changed := false
	for k, v := range want {
		if cur, ok := existing.Annotations[k]; ok && cur == v {
			continue
		}
		if existing.Annotations == nil {
			existing.Annotations = map[string]string{}
		}
		existing.Annotations[k] = v
		changed = true
	}
	return changed
}

// updateDefaultResources gives existing the capacity and allocatable of
// initial when it has none, and reports whether it changed.
func updateDefaultResources(initial, existing *v1.Node) bool {
	changed := false
	if existing.Status.Capacity == nil && initial.Status.Capacity != nil {
		existing.Status.Capacity = initial.Status.Capacity.DeepCopy()
		changed = true
	}
	if existing.Status.Allocatable == nil && initial.Status.Allocatable != nil {
		existing.Status.Allocatable = initial.Status.Allocatable.DeepCopy()
		changed = true
	}
	return changed
}

// setNodeStatus runs every setter on node. A failing setter is logged and
// the others still run, as upstream does. Then, as upstream's, it sets
// the features the node declares (status.declaredFeatures), if any.
func (kl *Kubelet) setNodeStatus(ctx context.Context, node *v1.Node) {
	for i, set := range kl.node.setters {
		if err := set(ctx, node); err != nil {
			klog.FromContext(ctx).Error(err, "Failed to set some node status fields", "node", kl.nodeName, "setter", i)
		}
	}
	if features := kl.declaredFeatures(); features != nil {
		node.Status.DeclaredFeatures = features
	}
}

// updateNodeStatus tries tryUpdateNodeStatus up to NodeStatusUpdateRetry
// times; from the second failure on it calls OnHeartbeatFailure, as
// upstream, so that a dead connection is not tried again.
func (kl *Kubelet) updateNodeStatus(ctx context.Context) error {
	var errs []error
	for i := range NodeStatusUpdateRetry {
		err := kl.tryUpdateNodeStatus(ctx, i)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if i > 0 && kl.node.onHeartbeatFailure != nil {
			kl.node.onHeartbeatFailure()
		}
		klog.FromContext(ctx).Error(err, "Error updating node status, will retry", "node", kl.nodeName)
		errs = append(errs, err)
	}
	return fmt.Errorf("update node %s status: %d attempts failed: %w", kl.nodeName, NodeStatusUpdateRetry, errors.Join(errs...))
}

// tryUpdateNodeStatus reads the node, runs the setters on a copy and patches
// the status when something changed (heartbeat times aside) or when
// NodeStatusReportFrequency has passed since the last write. Upstream reads
// the node from an informer's cache on the first try; this asks the API
// server, and on the first try lets it answer from its watch cache
// (resourceVersion "0"), so that the read does not reach etcd (what
// upstream did before it had the informer). A retry reads from etcd, and
// so does the first report: it follows the registration's write, which
// the watch cache of a busy API server may not hold yet ("not found", on
// a fleet's nodes by the tens, where upstream's informer has the same lag).
func (kl *Kubelet) tryUpdateNodeStatus(ctx context.Context, tryNumber int) error {
	opts := metav1.GetOptions{}
	if tryNumber == 0 && !kl.node.lastStatusReportTime.IsZero() {
		opts.ResourceVersion = "0"
	}
	original, err := kl.node.heartbeatClient.CoreV1().Nodes().Get(ctx, kl.nodeName, opts)
	if err != nil {
		return fmt.Errorf("get node %s (try %d): %w", kl.nodeName, tryNumber+1, err)
	}
	podCIDRChanged := false
	if len(original.Spec.PodCIDRs) != 0 {
		if podCIDRChanged, err = kl.updatePodCIDR(ctx, strings.Join(original.Spec.PodCIDRs, ",")); err != nil {
			klog.FromContext(ctx).Error(err, "Error updating pod CIDR")
		}
	}
	node, changed := kl.updateNode(ctx, original)
	changed = changed || podCIDRChanged
	expired := kl.isUpdateStatusPeriodExpired()
	if !changed && !expired {
		klog.FromContext(ctx).V(4).Info("Node status unchanged, not writing", "node", kl.nodeName)
		return nil
	}
	reason := "report period expired"
	switch {
	case kl.node.lastStatusReportTime.IsZero():
		reason = "first report"
	case changed:
		reason = "status changed"
	}
	// Upstream then picks a random delay of ±50 % of the report frequency
	// for the next unconditional write, so that nodes do not write in
	// step; here the period stays fixed so that it is easy to observe.
	updated, patch, err := nodestatus.PatchNodeStatus(ctx, kl.node.heartbeatClient.CoreV1(), original, node)
	if err != nil {
		return err
	}
	kl.node.lastStatusReportTime = kl.clock.Now()
	if kl.node.onStatusPatched != nil {
		kl.node.onStatusPatched(updated, patch, reason)
	}
	return nil
}

// isUpdateStatusPeriodExpired says whether NodeStatusReportFrequency has
// passed since the last write (always true before the first).
func (kl *Kubelet) isUpdateStatusPeriodExpired() bool {
	return kl.node.lastStatusReportTime.IsZero() || kl.clock.Since(kl.node.lastStatusReportTime) >= kl.node.nodeStatusReportFrequency
}

// updateNode returns a copy of original with the setters applied and the
// OS/arch labels corrected, and whether anything changed.
func (kl *Kubelet) updateNode(ctx context.Context, original *v1.Node) (*v1.Node, bool) {
	node := original.DeepCopy()
	labelsChanged := false
	for k, v := range map[string]string{v1.LabelOSStable: goruntime.GOOS, v1.LabelArchStable: goruntime.GOARCH} {
		if node.Labels[k] != v {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k] = v
			labelsChanged = true
		}
	}
	kl.setNodeStatus(ctx, node)
	return node, labelsChanged || NodeStatusHasChanged(&original.Status, &node.Status)
}

// NodeStatusHasChanged reports whether two statuses differ in anything but
// the conditions' lastHeartbeatTime. Conditions are compared by type, so
// their order does not matter.
func NodeStatusHasChanged(original, status *v1.NodeStatus) bool {
	if original == nil || status == nil {
		return original != status
	}
	if nodeConditionsHaveChanged(original.Conditions, status.Conditions) {
		return true
	}
	a, b := original.DeepCopy(), status.DeepCopy()
	a.Conditions, b.Conditions = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}

func nodeConditionsHaveChanged(original, conditions []v1.NodeCondition) bool {
	if len(original) != len(conditions) {
		return true
	}
	norm := func(in []v1.NodeCondition) []v1.NodeCondition {
		out := make([]v1.NodeCondition, len(in))
		copy(out, in)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Type < out[j].Type })
		for i := range out {
			out[i].LastHeartbeatTime = metav1.Time{}
		}
		return out
	}
	return !equality.Semantic.DeepEqual(norm(original), norm(conditions))
}
