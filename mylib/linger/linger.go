// Package linger closes a streaming session's connection the way net/http
// closes a response's: first "nothing more from me", then what the peer
// still sends is read and dropped until it closes too.
//
// Why: an exec session can end while its client still sends stdin (kubectl
// cp to a container without tar: the command is gone before it reads a
// byte). A connection closed with bytes unread is answered by the kernel
// with a reset instead of an orderly end, and a proxy in between (the
// kubelet's, the API server's: apimachinery's UpgradeAwareHandler) may then
// drop what the session wrote last, its exit code: kubectl says 0 for a
// command that failed. The runtime's streaming server and the kubelet's
// proxy both end their sessions through Close.
package linger

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// Timeout bounds how long Close waits for the peer to close; a proxy
// closes as soon as it has read the end, a client once it has the exit
// code.
const Timeout = 2 * time.Second

// Close half-closes c (a TCP FIN, or TLS's close_notify), drops what the
// peer still sends until it closes or Timeout passes, then closes c. A
// connection that cannot half-close is closed at once.
func Close(c net.Conn) error {
	if hc, ok := c.(interface{ CloseWrite() error }); ok && hc.CloseWrite() == nil {
		_ = c.SetReadDeadline(time.Now().Add(Timeout))
		_, _ = io.Copy(io.Discard, c)
	}
	return c.Close()
}

// Conn is a connection whose Close is linger's.
type Conn struct{ net.Conn }

func (c Conn) Close() error { return Close(c.Conn) }

// Writer is a ResponseWriter whose hijacked connection is a Conn.
type Writer struct{ http.ResponseWriter }

func (w Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	return Conn{c}, rw, nil
}

// Unwrap lets http.ResponseController find the writer's Flush.
func (w Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
