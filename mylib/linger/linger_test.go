package linger

import (
	"crypto/tls"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAConnEndsWithItsLastBytes: the session's end of a connection whose
// client sent stdin the session never read (its command had ended). The
// client reads what the session wrote last, then the end: not a reset.
// The runtime's streaming server is proven the same way, through its
// hijacked HTTP connection (fakeruntime's streaming_test.go).
func TestAConnEndsWithItsLastBytes(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	client, err := net.Dial("tcp", lis.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	conn, err := lis.Accept()
	require.NoError(t, err)
	session := Conn{conn}

	_, err = client.Write(make([]byte, 64<<10)) // stdin the session never reads
	require.NoError(t, err)
	_, err = session.Write([]byte("exit code 127"))
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- session.Close() }()

	got, err := io.ReadAll(client)
	assert.NoError(t, err, "the end of the connection, not a reset")
	assert.Equal(t, "exit code 127", string(got))
	require.NoError(t, client.Close())
	assert.NoError(t, <-closed, "closed once the client had")
}

// The kubelet's connections are TLS: its half-close is close_notify.
var _ interface{ CloseWrite() error } = (*tls.Conn)(nil)
