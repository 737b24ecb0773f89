package fleet

import (
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// nodeClient is the part of a clientset a node agent uses: Nodes (core) and
// Leases (coordination). A whole kubernetes.Clientset builds some fifty
// REST clients, which for a thousand agents was the largest part of the
// fleet's memory; any other group panics (nil Interface), a programming
// error since the node half uses only these two.
type nodeClient struct {
	kubernetes.Interface
	core  corev1client.CoreV1Interface
	coord coordinationv1client.CoordinationV1Interface
}

func (c *nodeClient) CoreV1() corev1client.CoreV1Interface { return c.core }
func (c *nodeClient) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return c.coord
}

// newNodeClient is one agent's only client, built like the kubelet's
// heartbeat client (nodelease.NewHeartbeatClient): requests time out after
// timeout, and every connection goes through a dialer that can close them
// all (after repeated heartbeat failures, and at shutdown). Upstream has a
// second client without the timeout for everything else; an agent of the
// fleet has nothing else, so one connection per agent instead of two.
func newNodeClient(cfg *rest.Config, timeout time.Duration) (*nodeClient, *connrotation.Dialer, error) {
	c := rest.CopyConfig(cfg)
	c.Timeout = timeout
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	c.Dial = d.DialContext
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	core, err := corev1client.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("core client: %w", err)
	}
	coord, err := coordinationv1client.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, nil, fmt.Errorf("coordination client: %w", err)
	}
	return &nodeClient{core: core, coord: coord}, d, nil
}
