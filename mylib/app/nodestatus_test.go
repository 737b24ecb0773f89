package app

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/mylib/options"
)

func TestNodeStatusMaxImagesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int32
	}{{nil, 50}, {[]string{"--node-status-max-images", "3"}, 3}, {[]string{"--node-status-max-images", "-1"}, -1}} {
		o := options.New("99-test")
		f := AddFlags(o, nil)
		require.NoError(t, o.Parse(append([]string{"--state-dir", t.TempDir()}, tc.args...)))
		require.NoError(t, o.Complete())
		kc := f.KubeletServer().KubeletConfiguration
		require.NotNil(t, kc.NodeStatusMaxImages)
		assert.Equal(t, tc.want, *kc.NodeStatusMaxImages, tc.args)
	}
	o := options.New("99-test")
	AddFlags(o, nil)
	assert.Error(t, o.Parse([]string{"--node-status-max-images", "-2"}))
}
