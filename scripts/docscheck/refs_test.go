package docscheck

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPathsFindsRepositoryPaths(t *testing.T) {
	md := "Run `scripts/cluster.sh up`, read [ch](chapters/01-node-lease/) and\n" +
		"kubectl apply -f yaml/nginx.yaml; see ./mylib/pleg. Not chapters/NN-slug/ or scripts/*.sh.\n" +
		"`mylib/bootstrap.LoadClientCert` is a function in mylib/bootstrap."
	require.Equal(t, []string{"chapters/01-node-lease", "mylib/bootstrap", "mylib/pleg", "scripts/cluster.sh", "yaml/nginx.yaml"}, Paths(md))
}

func TestChapterFlags(t *testing.T) {
	md := "go run ./chapters/01-node-lease --node-name n1 -v=2 --lease-duration 40s | tee x\n" +
		"go run ./chapters/02-bootstrap-token\n"
	require.Equal(t, map[string][]string{
		"01-node-lease":      {"node-name", "v", "lease-duration"},
		"02-bootstrap-token": nil,
	}, ChapterFlags(md))
}

func TestHelpDefines(t *testing.T) {
	help := "Usage of 01:\n  -kubeconfig string\n    \tpath\n  -node-name string\n"
	require.True(t, HelpDefines(help, "node-name"))
	require.False(t, HelpDefines(help, "node"))
	require.False(t, HelpDefines(help, "lease-duration"))
}
