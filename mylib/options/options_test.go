package options

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

func TestParseRejectsBadInput(t *testing.T) {
	o := New("test")
	o.Flags.SetOutput(new(strings.Builder))
	require.Error(t, o.Parse([]string{"--no-such-flag"}))

	o = New("test")
	require.ErrorContains(t, o.Parse([]string{"--node-name", "Not_A_Node"}), `--node-name "Not_A_Node" is not a valid node name`)

	o = New("test")
	require.ErrorContains(t, o.Parse([]string{"stray"}), `unexpected argument "stray"`)

	o = New("test")
	require.NoError(t, o.Parse([]string{"--node-name", "n1", "-v", "2", "--state-dir", "/tmp/x"}))
	require.Equal(t, "n1", o.NodeName)
	require.Equal(t, "/tmp/x", o.StateDir)
}

func TestDefaultNodeNameIsTheLowerCaseHostname(t *testing.T) {
	h, err := os.Hostname()
	require.NoError(t, err)
	require.Equal(t, strings.ToLower(h), DefaultNodeName())
}

func TestKubeconfigLoading(t *testing.T) {
	// No flag, no KUBECONFIG, no ~/.kube/config: a message that says what to do.
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	_, err := LoadRESTConfig("")
	require.ErrorIs(t, err, ErrNoKubeconfig)

	_, err = LoadRESTConfig("/does/not/exist")
	require.ErrorContains(t, err, "kubeconfig /does/not/exist")

	kc := filepath.Join(t.TempDir(), "kc")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	t.Setenv("KUBECONFIG", kc)
	cfg, err := LoadRESTConfig("")
	require.NoError(t, err, "KUBECONFIG is used when there is no flag")
	require.Equal(t, "https://127.0.0.1:1", cfg.Host)

	require.NoError(t, os.WriteFile(kc, []byte("this: [is not a kubeconfig"), 0o600))
	_, err = LoadRESTConfig(kc)
	require.ErrorContains(t, err, "load kubeconfig")
}

func TestUnreachableAPIServerIsOneClearError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = NewCheckedClientset(context.Background(), &rest.Config{Host: "https://" + addr})
	require.ErrorContains(t, err, "cannot reach the API server at https://"+addr)
}

// TestMainExitCodes runs Main in a child process, as a chapter would.
func TestMainExitCodes(t *testing.T) {
	if mode := os.Getenv("OPTIONS_TEST_MAIN"); mode != "" {
		o := New("chapter")
		o.Main(strings.Fields(os.Getenv("OPTIONS_TEST_ARGS")), func(ctx context.Context) error {
			if mode == "fail" {
				return fmt.Errorf("create lease %q: %w", "kube-node-lease/n1", errors.New("forbidden"))
			}
			return nil
		})
		os.Exit(0)
	}
	run := func(mode, args string) (int, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainExitCodes$")
		cmd.Env = append(os.Environ(), "OPTIONS_TEST_MAIN="+mode, "OPTIONS_TEST_ARGS="+args)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), string(out)
		}
		require.NoError(t, err)
		return 0, string(out)
	}
	code, out := run("ok", "--node-name n1")
	require.Equal(t, 0, code, out)

	code, out = run("ok", "--bogus")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "flag provided but not defined: -bogus")

	code, out = run("fail", "--node-name n1")
	require.Equal(t, 1, code, out)
	require.Equal(t, `chapter: error: create lease "kube-node-lease/n1": forbidden`, strings.TrimSpace(out))
	require.NotContains(t, out, "goroutine", "no panic trace")
}

func TestUseNodeKubeconfig(t *testing.T) {
	o := New("test")
	o.StateDir = t.TempDir()
	o.UseNodeKubeconfig()
	require.Empty(t, o.Kubeconfig, "no node kubeconfig yet: keep the loading rules")

	nodeKC := filepath.Join(o.StateDir, "kubelet.kubeconfig")
	require.NoError(t, os.WriteFile(nodeKC, []byte("{}"), 0o600))
	o.UseNodeKubeconfig()
	require.Equal(t, nodeKC, o.Kubeconfig)

	o.Kubeconfig = "/explicit"
	o.UseNodeKubeconfig()
	require.Equal(t, "/explicit", o.Kubeconfig, "an explicit --kubeconfig wins")
}
