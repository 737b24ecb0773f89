package testcluster

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// RepoRoot returns the root of the mykubelet checkout (the directory of the
// go.mod of module mykubelet) that holds the test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module mykubelet\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testcluster: not inside the mykubelet module")
		}
		dir = parent
	}
}

// BuildChapter builds a program of this module, e.g. "./chapters/01-node-lease",
// and returns the binary's path, so an end-to-end test runs exactly what a
// learner runs with `go run`. It asks `go run` itself, with -exec echo: go
// run keeps the programs it links in Go's build cache, so a program that
// many tests and packages build is linked once (a link of a chapter is
// seconds of a core; CI's tests ask some forty times). A program linked
// anew is in a directory go run removes when it exits; asked again, go run
// gives the cache's copy, which the caller must not change.
func BuildChapter(t testing.TB, pkg string) string {
	t.Helper()
	for range 2 {
		cmd := exec.Command("go", "run", "-exec", "echo", pkg)
		cmd.Dir = RepoRoot(t)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, stderr.String())
		}
		bin := strings.TrimSpace(string(out))
		if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() {
			return bin
		}
	}
	t.Fatalf("go run -exec echo %s: the binary it named is gone twice", pkg)
	return ""
}

// WriteKubeconfig writes cfg (host, CA and client certificate or bearer
// token) as a kubeconfig file in the test's temporary directory, for passing
// to a chapter binary with --kubeconfig. It returns the path.
func WriteKubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// FreePorts is n TCP ports on 127.0.0.1, each different, that nothing
// listened on a moment ago: each is held until all are chosen.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
