package nodelease

import (
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
)

// HeartbeatClient is the client the kubelet heartbeats with (the Lease and
// the node status), as upstream's makeKubeDeps and buildKubeletClientConfig
// (cmd/kubelet/app/server.go) build it.
type HeartbeatClient struct {
	// Interface is the clientset: every request ends after the timeout, and
	// client-side throttling is off (a heartbeat must not queue behind
	// other requests).
	kubernetes.Interface
	dialer *connrotation.Dialer
}

// NewHeartbeatClient copies cfg into a heartbeat client whose requests time
// out after min(nodeStatusUpdateFrequency, leaseDuration) and whose
// connections all go through one dialer that can close them (CloseAllConns).
// cfg must not set its own Dial or Transport.
func NewHeartbeatClient(cfg *rest.Config, nodeStatusUpdateFrequency, leaseDuration time.Duration) (*HeartbeatClient, error) {
	if cfg == nil {
		return nil, errors.New("heartbeat client: a rest.Config is required")
	}
	if cfg.Dial != nil || cfg.Transport != nil {
		return nil, errors.New("heartbeat client: the rest.Config already has a dialer or transport")
	}
	timeout := min(nodeStatusUpdateFrequency, leaseDuration)
	if timeout <= 0 {
		return nil, fmt.Errorf("heartbeat client: the timeout must be positive (node status update frequency %v, lease duration %v)", nodeStatusUpdateFrequency, leaseDuration)
	}
	hb := rest.CopyConfig(cfg)
	hb.Timeout = timeout
	hb.QPS = -1 // no client-side rate limit
	// The same dialer as upstream's updateDialer: 30 s to connect, TCP
	// keep-alive every 30 s, every connection tracked.
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	hb.Dial = d.DialContext
	cs, err := kubernetes.NewForConfig(hb)
	if err != nil {
		return nil, fmt.Errorf("heartbeat client: %w", err)
	}
	return &HeartbeatClient{Interface: cs, dialer: d}, nil
}

// CloseAllConns closes every connection the client opened, so that the next
// request dials a new one. Call it after a heartbeat failed again
// (upstream's OnHeartbeatFailure): with HTTP/2, every request shares one
// connection, and one that went half-open (the peer vanished without a
// reset) would otherwise fail every heartbeat until the kernel gives up on
// it, which takes many minutes.
func (c *HeartbeatClient) CloseAllConns() { c.dialer.CloseAll() }
