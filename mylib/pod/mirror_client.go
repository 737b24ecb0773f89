package pod

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"mykubelet/mylib/kubetypes"
)

// MirrorClient creates and deletes mirror pods in the API server.
type MirrorClient interface {
	// CreateMirrorPod creates the mirror pod of the static pod: a copy with
	// the config.mirror annotation and an owner reference to the Node.
	CreateMirrorPod(ctx context.Context, pod *v1.Pod) error
	// DeleteMirrorPod deletes the mirror pod called podFullName
	// (name_namespace) at once; with uid, only if it still has that UID. It
	// reports whether it deleted a pod; a pod already gone is not an error.
	DeleteMirrorPod(ctx context.Context, podFullName string, uid *types.UID) (bool, error)
}

// ErrMirrorPodExists is returned by CreateMirrorPod when the mirror pod is
// already there, with the same hash: nothing to do. (Upstream returns nil;
// telling it apart lets SyncMirrorPod report only real changes.)
var ErrMirrorPodExists = errors.New("mirror pod already exists")

// NodeGetter returns the Node object (for its UID).
type NodeGetter func(ctx context.Context, name string) (*v1.Node, error)

type basicMirrorClient struct {
	client   kubernetes.Interface
	nodeName string
	getNode  NodeGetter
}

// NewBasicMirrorClient returns a MirrorClient that uses client, which should
// carry the node's own credentials (system:node:<nodeName>). getNode may be
// nil: the Node is then read from the API server each time a mirror pod is
// created (upstream uses an informer's lister).
func NewBasicMirrorClient(client kubernetes.Interface, nodeName string, getNode NodeGetter) MirrorClient {
	if getNode == nil {
		getNode = func(ctx context.Context, name string) (*v1.Node, error) {
			return client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
	}
	return &basicMirrorClient{client: client, nodeName: nodeName, getNode: getNode}
}

func (mc *basicMirrorClient) CreateMirrorPod(ctx context.Context, pod *v1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	mirror := pod.DeepCopy()
	mirror.ResourceVersion = ""
	mirror.UID = "" // the API server gives the mirror pod its own UID
	hash := getPodHash(pod)
	if mirror.Annotations == nil {
		mirror.Annotations = map[string]string{}
	}
	mirror.Annotations[kubetypes.ConfigMirrorAnnotationKey] = hash

	node, err := mc.getNode(ctx, mc.nodeName)
	if err != nil {
		return fmt.Errorf("create mirror pod %s: get node %s: %w", key, mc.nodeName, err)
	}
	// NodeRestriction requires this owner reference: the node may only
	// create pods that it owns and that are bound to itself.
	controller := true
	mirror.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: "v1",
		Kind:       "Node",
		Name:       node.Name,
		UID:        node.UID,
		Controller: &controller,
	}}

	_, err = mc.client.CoreV1().Pods(mirror.Namespace).Create(ctx, mirror, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Fine if what is there already mirrors this very static pod (we
		// created it and have not seen it yet).
		existing, getErr := mc.client.CoreV1().Pods(mirror.Namespace).Get(ctx, mirror.Name, metav1.GetOptions{})
		if getErr == nil && existing.Annotations[kubetypes.ConfigMirrorAnnotationKey] == hash {
			return fmt.Errorf("create mirror pod %s: %w", key, ErrMirrorPodExists)
		}
	}
	if err != nil {
		return fmt.Errorf("create mirror pod %s: %w", key, err)
	}
	return nil
}

func (mc *basicMirrorClient) DeleteMirrorPod(ctx context.Context, podFullName string, uid *types.UID) (bool, error) {
	name, namespace, err := kubetypes.ParsePodFullName(podFullName)
	if err != nil {
		return false, err
	}
	klog.V(2).InfoS("Deleting a mirror pod", "pod", klog.KRef(namespace, name))
	var grace int64 // 0: the kubelet is the one who would wait; a mirror pod has nothing to stop
	err = mc.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: uid},
	})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err): // gone, or already replaced (UID precondition)
		return false, nil
	default:
		return false, fmt.Errorf("delete mirror pod %s/%s: %w", namespace, name, err)
	}
}

// getPodHash is the static pod's hash (config.hash, set by the file source).
func getPodHash(pod *v1.Pod) string { return pod.Annotations[kubetypes.ConfigHashAnnotationKey] }

// IsMirrorPodOf reports whether mirrorPod mirrors pod: same name and
// namespace, and the hash it carries is the static pod's current hash.
func IsMirrorPodOf(mirrorPod, pod *v1.Pod) bool {
	if pod.Name != mirrorPod.Name || pod.Namespace != mirrorPod.Namespace {
		return false
	}
	hash, ok := mirrorPod.Annotations[kubetypes.ConfigMirrorAnnotationKey]
	return ok && hash == getPodHash(pod)
}
