package silent

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAcceptsAndNeverAnswers(t *testing.T) {
	s := Start(t)
	c, err := net.Dial("tcp", s.Addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(200*time.Millisecond)))
	_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout(), "no answer, only the read deadline")
	require.Eventually(t, func() bool { return s.Accepted() == 1 }, 5*time.Second, 10*time.Millisecond)
}
