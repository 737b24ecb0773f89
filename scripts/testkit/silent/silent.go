// Package silent gives a test a TCP server on 127.0.0.1 that accepts every
// connection and never answers, not even a TLS handshake: the half-open
// peer that timeouts exist for. Connections are held open until the test
// ends.
package silent

import (
	"net"
	"sync"
	"testing"
)

// Server is a silent server's address and the connections it accepted.
type Server struct {
	Addr string

	mu    sync.Mutex
	conns []net.Conn
}

// Start listens on a free port of 127.0.0.1; the test's cleanup closes the
// listener and every connection.
func Start(t testing.TB) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("silent server: %v", err)
	}
	s := &Server{Addr: lis.Addr().String()}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return // the listener is closed
			}
			s.mu.Lock()
			s.conns = append(s.conns, c) // held open, never answered
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			c.Close()
		}
	})
	return s
}

// Accepted is how many connections the server has accepted so far.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
