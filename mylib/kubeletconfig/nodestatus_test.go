package kubeletconfig

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNodeStatusMaxImagesDefaultsTo50(t *testing.T) {
	f, err := parse(t)
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	require.NotNil(t, kc.NodeStatusMaxImages)
	assert.Equal(t, int32(50), *kc.NodeStatusMaxImages)
}

func TestNodeStatusMaxImagesFromTheFileAndTheFlag(t *testing.T) {
	path := writeConfig(t, header+"nodeStatusMaxImages: 7\n")
	f, err := parse(t, "--config", path)
	require.NoError(t, err)
	kc, err := f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, int32(7), *kc.NodeStatusMaxImages, "a supported field")

	f, err = parse(t, "--config", path, "--node-status-max-images", "-1")
	require.NoError(t, err)
	kc, err = f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, int32(-1), *kc.NodeStatusMaxImages, "the flag wins; -1 is no cap")

	f, err = parse(t, "--config", writeConfig(t, header+"nodeStatusMaxImages: 0\n"))
	require.NoError(t, err)
	kc, err = f.KubeletConfiguration()
	require.NoError(t, err)
	assert.Equal(t, int32(0), *kc.NodeStatusMaxImages, "0 is kept (no images), not defaulted")
}

func TestNodeStatusMaxImagesBelowMinusOneIsRefused(t *testing.T) {
	_, err := parse(t, "--node-status-max-images", "-2")
	assert.ErrorContains(t, err, "-1 (no cap) or more")
	_, err = parse(t, "--node-status-max-images", "many")
	assert.Error(t, err)

	f, err := parse(t, "--config", writeConfig(t, header+"nodeStatusMaxImages: -5\n"))
	require.NoError(t, err)
	_, err = f.KubeletConfiguration()
	assert.ErrorContains(t, err, "nodeStatusMaxImages -5")
}
