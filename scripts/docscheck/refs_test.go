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

func TestChapterNumbersFindsCommentsAndStrings(t *testing.T) {
	src := []byte("package p\n// Wiring (chapter 07):\nvar chapter05 = 1 // the chapters print it\n" +
		"const s = \"run chapters/02-bootstrap-token\"\n/* chapters 06 and later */\nvar chapter = \"see chapter\"\n")
	require.Equal(t, []string{"p.go:2:1: chapter 07", "p.go:4:11: chapters/02-", "p.go:5:1: chapters 06"}, ChapterNumbers("p.go", src))
}

func TestGoRefs(t *testing.T) {
	md := "`mylib/bootstrap.LoadClientCert` and mylib/fakeruntime/fakeruntimetest.Serve, not mylib/pleg alone, twice mylib/bootstrap.LoadClientCert"
	require.Equal(t, []GoRef{{"mylib/bootstrap", "LoadClientCert"}, {"mylib/fakeruntime/fakeruntimetest", "Serve"}}, GoRefs(md))
}

func TestHouseMap(t *testing.T) {
	md := "# x\n## Map of the house\n\n| mylib | upstream | first |\n|---|---|---|\n| `mylib/pleg` | `pkg/kubelet/pleg` | 05 |\n" +
		"| `mylib/kubelet` | `pkg/kubelet` | 04 |\n\n## Next\n| `mylib/other` | x | y |\n"
	require.Equal(t, []string{"mylib/pleg", "mylib/kubelet"}, HouseMap(md))
}

func TestPackageDeclares(t *testing.T) {
	for name, want := range map[string]bool{"Paths": true, "GoRef": true, "chapterNumber": true, "NoSuchThing": false, "String": false} {
		got, err := PackageDeclares(".", name)
		require.NoError(t, err)
		require.Equal(t, want, got, name)
	}
}
