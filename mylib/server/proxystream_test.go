package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/mylib/linger"
)

// TestAProxiedSessionEndsWithItsLastBytes: a session behind the kubelet's
// proxy writes its last bytes (an exec's exit code) and ends while the
// client still sends stdin (kubectl cp to a container without tar). The
// client reads those bytes, then the end of the connection, and its stdin
// goes into the proxy's drain (package linger). Closed at once, the
// proxy's socket still holds stdin it never read, and the kernel answers
// with a reset: the client's writes fail, and a reset that comes before
// the client has read the exit code loses it (kubectl then says 0).
func TestAProxiedSessionEndsWithItsLastBytes(t *testing.T) {
	// The runtime's side: upgrades, writes, ends without reading a byte.
	runtime := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\nexit code 127")
		_ = rw.Flush()
		_ = linger.Close(conn) // as the runtime's streaming server ends
	}))
	defer runtime.Close()
	kubelet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(&Server{}).proxyStream(w, r, runtime.URL+"/exec/token", nil)
	}))
	defer kubelet.Close()

	client, err := net.Dial("tcp", kubelet.Listener.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	_, err = io.WriteString(client, "POST /exec/default/p/c HTTP/1.1\r\nHost: kubelet\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
	require.NoError(t, err)
	stdin := make(chan error, 1)
	go func() { // stdin, more than the kernel's buffers on the way hold, that the session never reads
		_, err := client.Write(make([]byte, 4<<20))
		if err == nil {
			err = client.(*net.TCPConn).CloseWrite()
		}
		stdin <- err
	}()

	br := bufio.NewReader(client)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	got, err := io.ReadAll(br)
	assert.NoError(t, err, "the end of the connection, not a reset")
	assert.Equal(t, "exit code 127", string(got))
	assert.NoError(t, <-stdin, "the client's stdin ends in the proxy's drain, not in a reset")
}
