package linger

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestASessionEndsWithItsLastBytes: a streaming session, its connection
// hijacked through Writer, whose command ended while the client still
// sent its stdin. The client reads what the session wrote last, then the
// end of the connection: not a reset, which a proxy in between may answer
// by dropping the exit code.
func TestASessionEndsWithItsLastBytes(t *testing.T) {
	sent, closed := make(chan struct{}), make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := Writer{w}.Hijack()
		if err != nil {
			closed <- err
			return
		}
		<-sent                                    // the client's stdin is there,
		_, _ = io.WriteString(c, "exit code 127") // and the session never reads it
		closed <- c.Close()
	}))
	defer srv.Close()

	client, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	_, err = io.WriteString(client, "POST /exec HTTP/1.1\r\nHost: runtime\r\nContent-Length: 65536\r\n\r\n"+strings.Repeat("x", 64<<10))
	require.NoError(t, err)
	close(sent)

	got, err := io.ReadAll(client)
	assert.NoError(t, err, "the end of the connection, not a reset")
	assert.Equal(t, "exit code 127", string(got))
	require.NoError(t, client.Close())
	assert.NoError(t, <-closed, "closed once the client had")
}

// The kubelet's connections are TLS: its half-close is close_notify.
var _ interface{ CloseWrite() error } = (*tls.Conn)(nil)
