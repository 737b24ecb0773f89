package options

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"mykubelet/mylib/statedir"
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

// An API server that answers 401 is reachable: the error says that the
// credentials were refused, not that the server cannot be reached.
func TestRefusedCredentialsAreNotReportedAsUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
	}))
	defer srv.Close()
	_, err := NewCheckedClientset(context.Background(), &rest.Config{Host: srv.URL})
	require.ErrorContains(t, err, "the API server at "+srv.URL+" refused our credentials")
	require.NotContains(t, err.Error(), "cannot reach")
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
	require.Equal(t, "chapter: flag provided but not defined: -bogus (see --help)\n", out, "one line, no usage")

	code, out = run("ok", "--help")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "-node-name")
	require.Contains(t, out, "-v value")
	require.NotContains(t, out, "logtostderr", "only klog's verbosity flags")

	code, out = run("fail", "--node-name n1")
	require.Equal(t, 1, code, out)
	require.Equal(t, `chapter: error: create lease "kube-node-lease/n1": forbidden`, strings.TrimSpace(out))
	require.NotContains(t, out, "goroutine", "no panic trace")
}

func TestNodeKubeconfigPolicy(t *testing.T) {
	state := t.TempDir()
	t.Setenv("KUBECONFIG", writeKubeconfig(t, "")) // the admin's: never used by a node program

	o := New("test")
	o.UseNodeKubeconfig("go run ./bootstrap")
	require.NoError(t, o.Parse([]string{"--state-dir", state}))
	err := o.Complete()
	require.EqualError(t, err, "no node kubeconfig at "+filepath.Join(state, "kubelet.kubeconfig")+
		": run `go run ./bootstrap` first, or pass --kubeconfig to use another one")

	nodeKC := filepath.Join(state, "kubelet.kubeconfig")
	require.NoError(t, os.Rename(writeKubeconfig(t, "n7"), nodeKC))
	o = New("test")
	o.UseNodeKubeconfig("go run ./bootstrap")
	require.NoError(t, o.Parse([]string{"--state-dir", state}))
	require.NoError(t, o.Complete())
	require.Equal(t, nodeKC, o.Kubeconfig)
	require.Equal(t, "n7", o.NodeName, "the node name comes from the certificate")

	o = New("test")
	o.UseNodeKubeconfig("go run ./bootstrap")
	require.NoError(t, o.Parse([]string{"--state-dir", state, "--node-name", "other"}))
	require.NoError(t, o.Complete())
	require.Equal(t, "other", o.NodeName, "an explicit --node-name wins")

	explicit := writeKubeconfig(t, "")
	o = New("test")
	o.UseNodeKubeconfig("go run ./bootstrap")
	require.NoError(t, o.Parse([]string{"--state-dir", state, "--kubeconfig", explicit}))
	require.NoError(t, o.Complete())
	require.Equal(t, explicit, o.Kubeconfig, "an explicit --kubeconfig wins")
	require.Equal(t, DefaultNodeName(), o.NodeName, "no node certificate: the hostname")

	o = New("test") // not a node program: the loading rules, and the hostname
	require.NoError(t, o.Parse([]string{"--state-dir", state}))
	require.NoError(t, o.Complete())
	require.Empty(t, o.Kubeconfig)
	require.Equal(t, DefaultNodeName(), o.NodeName)
}

// writeKubeconfig writes a kubeconfig for https://127.0.0.1:1 that
// authenticates with a client certificate for system:node:<node>, or with a
// token when node is empty, and returns its path.
func writeKubeconfig(t *testing.T, node string) string {
	t.Helper()
	user := "{token: abc}"
	if node != "" {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		require.NoError(t, err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		user = fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}",
			base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	}
	kc := filepath.Join(t.TempDir(), "kc")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: `+user+`}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	return kc
}

func TestMissingKUBECONFIGIsReportedAsMissing(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "/missing")
	_, err := LoadRESTConfig("")
	require.EqualError(t, err, "kubeconfig /missing (from $KUBECONFIG): no such file or directory")

	t.Setenv("KUBECONFIG", "/missing"+string(os.PathListSeparator)+writeKubeconfig(t, ""))
	_, err = LoadRESTConfig("")
	require.NoError(t, err, "one file of the list is enough, as for kubectl")
}

func TestEveryDurationFlagMustBePositive(t *testing.T) {
	for _, args := range [][]string{{"--d=0"}, {"--d=-1s"}, {"--file-check-frequency=0"}, {"--housekeeping-interval=-2s"}, {"--relist-period=0s"}} {
		o := New("test")
		o.Flags.Duration("d", time.Second, "a chapter's own duration flag")
		o.PodSources()
		o.Runtime(time.Second)
		err := o.Parse(args)
		require.Error(t, err, args)
		require.Contains(t, err.Error(), "must be positive", args)
	}
	o := New("test")
	o.Flags.Duration("d", time.Second, "")
	require.NoError(t, o.Parse([]string{"--d=1ms"}))
}

func TestIntRangeFlags(t *testing.T) {
	for _, args := range [][]string{{"--max-pods=-1"}, {"--port=99999"}, {"--port=0"}, {"--port=x"}} {
		o := New("test")
		o.MaxPods(110)
		o.Port("port", 10250, "")
		err := o.Parse(args)
		require.Error(t, err, args)
		require.Contains(t, err.Error(), "invalid value", args)
	}
	o := New("test")
	maxPods, port := o.MaxPods(110), o.Port("port", 10250, "")
	require.NoError(t, o.Parse(nil))
	require.Equal(t, []int{110, 10250}, []int{*maxPods, *port}, "defaults")
	require.NoError(t, o.Parse([]string{"--max-pods=0", "--port=65535"}))
	require.Equal(t, []int{0, 65535}, []int{*maxPods, *port})
}

func TestFlagGroupsFillInTheirDefaults(t *testing.T) {
	state := t.TempDir()
	o := New("test")
	src, rt, dbg := o.PodSources(), o.Runtime(time.Second), o.DebugServer()
	require.NoError(t, o.Parse([]string{"--state-dir", state}))
	require.NoError(t, o.Complete())
	require.Equal(t, filepath.Join(state, "manifests"), src.ManifestPath)
	st, err := os.Stat(src.ManifestPath)
	require.NoError(t, err, "the manifest directory is created")
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	require.Equal(t, 20*time.Second, src.FileCheckFrequency)
	require.Equal(t, 2*time.Second, src.HousekeepingInterval)
	require.Equal(t, "unix://"+filepath.Join(state, statedir.RuntimeSocket), rt.Endpoint)
	require.True(t, rt.Fake)
	require.Equal(t, "127.0.0.1:10255", dbg.Address)
	dbg.Address = "0.0.0.0:0"
	_, err = dbg.Listen()
	require.ErrorContains(t, err, "use 127.0.0.1 or localhost")
}
