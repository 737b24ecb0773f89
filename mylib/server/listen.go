package server

import (
	"fmt"
	"net"
)

// ListenLoopback listens on addr, the value of the flag named flagName, and
// refuses anything but a loopback address: the debug servers have no
// authentication.
func ListenLoopback(flagName, addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", flagName, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--%s %q: use 127.0.0.1 or localhost; the debug server has no authentication", flagName, addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	return lis, nil
}
