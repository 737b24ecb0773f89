package fleet

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// oneConn is an agent's HTTP/1.1 client: an http.RoundTripper over one
// kept-alive TLS connection, one request at a time, done entirely in the
// caller's goroutine. client-go's REST clients run on top of it unchanged.
//
// Why not net/http's Transport: it keeps two goroutines per connection (one
// reading, one writing) and a 4 KiB buffer each way for as long as the
// connection lives. For one process holding a thousand connections that
// wait ten seconds between two requests, that was the largest part of its
// memory. Here an idle connection is a tls.Conn and nothing else: the
// request is written and its answer read by the goroutine that asked, with
// buffers taken from a pool shared by every agent and given back at once.
//
// What it does not do, because an agent's few requests (GET, PUT and PATCH
// of its Node and Lease) do not need it: HTTP/2, proxies, redirects,
// compression, 100-continue, streaming answers (each body is read whole
// before RoundTrip returns, so a watch would never return: do not use it
// for one).
type oneConn struct {
	addr    string // host:port of the API server
	dialer  *tls.Dialer
	timeout time.Duration // of each request, dial and wait included (0: none)

	// turn is held for a whole request: HTTP/1.1 carries one at a time.
	// A channel rather than a mutex so that waiting for it ends with the
	// request's context.
	turn chan struct{}

	mu   sync.Mutex
	conn *meteredConn // nil until dialled, and after an error or CloseAll
}

// newOneConn dials addr (host:port) with tlsConfig when the first request
// comes, and again after the connection is lost. Each request ends after
// timeout (0: when its context ends): the transport keeps the time itself,
// because http.Client.Timeout would start a goroutine per request to watch
// it (net/http does that for any transport but its own).
func newOneConn(addr string, tlsConfig *tls.Config, timeout time.Duration) *oneConn {
	return &oneConn{
		addr:    addr,
		timeout: timeout,
		dialer: &tls.Dialer{
			NetDialer: &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
			Config:    tlsConfig,
		},
		turn: make(chan struct{}, 1),
	}
}

// meteredConn counts what one request read from the connection: a request
// on a kept-alive connection that the server closed meanwhile fails before
// any byte of an answer comes, and only then is it sent again.
type meteredConn struct {
	*tls.Conn
	read int64
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	return n, err
}

// The buffers of the requests under way, shared by every agent.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
)

// longAgo is a deadline that has passed: setting it wakes a blocked read or
// write at once.
var longAgo = time.Unix(1, 0)

// RoundTrip sends req over the agent's connection (dialling it if there is
// none) and returns the answer with its body read whole. If the connection
// was kept from an earlier request and fails before any byte of the answer
// came, the server closed it meanwhile (it restarted, or it closes idle
// connections): the request is sent once more, over a new connection.
// That is what net/http does for GETs; here it is done for PUT and PATCH
// too, and it is safe for what an agent writes: a Lease PUT carries the
// resourceVersion it read, so if the first one did arrive the second is
// answered 409 Conflict (the lease controller reads the Lease again and
// retries), and a status PATCH applied twice leaves what applying it once
// leaves.
func (t *oneConn) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	if req.URL.Scheme != "https" || req.URL.Host != t.addr {
		closeBody(req)
		return nil, fmt.Errorf("fleet transport: %s: only https://%s is served", req.URL.Redacted(), t.addr)
	}
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		closeBody(req)
		return nil, ctx.Err()
	}
	defer func() { <-t.turn }()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c, reused, err := t.get(ctx)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := exchange(ctx, c, req)
		if err == nil {
			if resp.Close {
				t.drop(c) // the server said Connection: close
			}
			return resp, nil
		}
		t.drop(c)
		if cerr := ctxErr(ctx); cerr != nil {
			return nil, fmt.Errorf("%w (%v)", cerr, err)
		}
		if attempt > 1 || !reused || c.read > 0 || !closedByServer(err) || req.GetBody == nil && req.Body != nil && req.Body != http.NoBody {
			return nil, err
		}
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(ctx)
			req.Body = body
		}
	}
}

// ctxErr is ctx.Err(), or context.DeadlineExceeded once the deadline has
// passed: the connection's deadline (set from the context's) can end a read
// a moment before the context's own timer marks it done.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// closedByServer says whether err is what reading or writing a connection
// that the other end closed gives (not a timeout, not our own Close).
func closedByServer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// get returns the connection, dialling one if there is none.
func (t *oneConn) get(ctx context.Context) (c *meteredConn, reused bool, err error) {
	t.mu.Lock()
	c = t.conn
	t.mu.Unlock()
	if c != nil {
		return c, true, nil
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, false, err
	}
	c = &meteredConn{Conn: nc.(*tls.Conn)}
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
	return c, false, nil
}

// drop closes c and forgets it, if it is still the agent's connection.
func (t *oneConn) drop(c *meteredConn) {
	t.mu.Lock()
	if t.conn == c {
		t.conn = nil
	}
	t.mu.Unlock()
	_ = c.Close()
}

// CloseAll closes the connection, idle or busy (a request on it fails):
// the next request dials afresh. The kubelet calls it after repeated
// heartbeat failures, the fleet at shutdown.
func (t *oneConn) CloseAll() {
	t.mu.Lock()
	c := t.conn
	t.conn = nil
	t.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// CloseIdleConnections is CloseAll, for client-go's
// utilnet.CloseIdleConnectionsFor.
func (t *oneConn) CloseIdleConnections() { t.CloseAll() }

// exchange writes req on c and reads the answer, body and all, within the
// context's deadline; cancelling the context interrupts it.
func exchange(ctx context.Context, c *meteredConn, req *http.Request) (*http.Response, error) {
	deadline, _ := ctx.Deadline() // zero: none
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(longAgo) })
	defer stop()
	c.read = 0

	w := writers.Get().(*bufio.Writer)
	w.Reset(c)
	err := req.Write(w) // closes req.Body
	if err == nil {
		err = w.Flush()
	}
	w.Reset(nil)
	writers.Put(w)
	if err != nil {
		return nil, err
	}

	r := readers.Get().(*bufio.Reader)
	r.Reset(c)
	defer func() {
		r.Reset(nil)
		readers.Put(r)
	}()
	resp, err := http.ReadResponse(r, req)
	if err != nil {
		return nil, err
	}
	body, err := readBody(resp)
	if err != nil {
		return nil, err
	}
	if r.Buffered() > 0 {
		// Bytes after the answer: the connection is out of step. Use the
		// answer, but not the connection again.
		resp.Close = true
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.TransferEncoding = nil
	return resp, nil
}

// readBody reads the answer's body whole.
func readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	if n := resp.ContentLength; n >= 0 && n < 64<<20 {
		b := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(resp.Body)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
