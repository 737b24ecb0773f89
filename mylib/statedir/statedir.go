// Package statedir is where mykubelet keeps what it generates: keys,
// certificates, tokens and kubeconfigs. None of it belongs in git: the
// default directory, .state at the repository root, is git-ignored, and every
// file is written with mode 0600.
package statedir

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EnvVar overrides the default state directory.
const EnvVar = "MYKUBELET_STATE_DIR"

// Default returns $MYKUBELET_STATE_DIR, else .state at the root of the
// mykubelet checkout that holds the working directory, else ~/.mykubelet.
func Default() string {
	if d := os.Getenv(EnvVar); d != "" {
		return d
	}
	if root, ok := repoRoot(); ok {
		return filepath.Join(root, ".state")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".mykubelet")
	}
	return ".state"
}

// repoRoot walks up from the working directory to the go.mod of module mykubelet.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module mykubelet\n") {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// fsync is (*os.File).Sync; a test replaces it to see what is synced when.
var fsync = (*os.File).Sync

// WriteFile writes data to path with mode 0600, creating its directory with
// mode 0700. It writes a temporary file, flushes it to disk (fsync) and
// renames it, then flushes the directory, so a reader never sees half a
// file, and after a crash or power loss path holds either the old content
// or the new, never an empty or partial file.
func WriteFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Without this the rename may reach the disk before the data does.
	if err := fsync(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// The rename is an entry in the directory: flush it too.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	defer d.Close()
	if err := fsync(d); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}

// The files the chapters hand to each other, named after the kubelet's own
// (/etc/kubernetes/bootstrap-kubelet.conf, /etc/kubernetes/kubelet.conf,
// /var/lib/kubelet/pki/kubelet-client-current.pem).
const (
	// BootstrapKubeconfig is written with the bootstrap token: token
	// credentials.
	BootstrapKubeconfig = "bootstrap-kubelet.kubeconfig"
	// NodeKubeconfig is written by the TLS bootstrap: the node's own client
	// certificate. Programs acting as the node use it by default.
	NodeKubeconfig = "kubelet.kubeconfig"
	// ClientCertCurrent is the node's key and certificate in one PEM file,
	// like the kubelet's kubelet-client-current.pem.
	ClientCertCurrent = "pki/kubelet-client-current.pem"
	// AdminKubeconfig is the local cluster's admin kubeconfig, written by
	// scripts/cluster.sh up.
	AdminKubeconfig = "cluster/admin.kubeconfig"
	// ManifestDir is the default static pod directory (--pod-manifest-path).
	ManifestDir = "manifests"
	// RuntimeSocket is where the mock CRI runtime listens by default.
	RuntimeSocket = "mykubelet.sock"
	// RuntimeControlSocket is where the mock runtime's control API listens
	// by default: a unix socket of mode 0600 that only its user can reach.
	RuntimeControlSocket = "runtime-control.sock"
)

// Path joins a name from the list above to a state directory.
func Path(stateDir, name string) string { return filepath.Join(stateDir, name) }
