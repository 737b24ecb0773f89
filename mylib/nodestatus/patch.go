package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// PatchNodeStatus sends the difference between oldNode (as read from the API
// server) and newNode to the node's status subresource, as a strategic merge
// patch, and returns the node the API server stored and the patch it sent.
// It is the kubelet's way (k8s.io/component-helpers/node/util,
// PatchNodeStatus): a patch carries only what changed, and it never
// overwrites fields this client did not touch (a full Update would).
func PatchNodeStatus(ctx context.Context, c corev1client.NodesGetter, oldNode, newNode *v1.Node) (*v1.Node, []byte, error) {
	patch, err := PreparePatchBytesForNodeStatus(oldNode, newNode)
	if err != nil {
		return nil, nil, err
	}
	updated, err := c.Nodes().Patch(ctx, oldNode.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, nil, fmt.Errorf("patch status of node %s: %w", oldNode.Name, err)
	}
	return updated, patch, nil
}

// PreparePatchBytesForNodeStatus computes the strategic merge patch from
// oldNode to newNode's status (and metadata; the spec is never patched here).
func PreparePatchBytesForNodeStatus(oldNode, newNode *v1.Node) ([]byte, error) {
	oldData, err := json.Marshal(oldNode)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", oldNode.Name, err)
	}
	diffNode := newNode.DeepCopy()
	diffNode.Spec = oldNode.Spec
	// status.addresses is declared "merge by type" in the API, but two
	// addresses may share a type (two InternalIPs), so a merge can produce a
	// wrong list. When the addresses change, replace the whole list instead.
	replaceAddresses := len(oldNode.Status.Addresses) > 0 && !equality.Semantic.DeepEqual(oldNode.Status.Addresses, newNode.Status.Addresses)
	if replaceAddresses {
		diffNode.Status.Addresses = oldNode.Status.Addresses
	}
	newData, err := json.Marshal(diffNode)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", oldNode.Name, err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("node %s: create patch: %w", oldNode.Name, err)
	}
	if !replaceAddresses {
		return patch, nil
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("node %s: %w", oldNode.Name, err)
	}
	status, _ := m["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		m["status"] = status
	}
	addrs := []any{}
	for _, a := range newNode.Status.Addresses {
		addrs = append(addrs, map[string]any{"type": string(a.Type), "address": a.Address})
	}
	// The directive {"$patch": "replace"} in a list means "this list
	// replaces the stored one".
	status["addresses"] = append(addrs, map[string]any{"$patch": "replace"})
	return json.Marshal(m)
}
