package fleet

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServeProfilesOnLoopbackOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := ServeProfiles(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "# HeapInuse = ")

	for _, bad := range []string{"0.0.0.0:6060", ":6060", "example.com:6060", "127.0.0.1"} {
		_, err := ServeProfiles(ctx, bad)
		assert.Error(t, err, bad)
	}
}
