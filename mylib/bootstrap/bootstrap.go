// Package bootstrap is the node side of TLS bootstrapping, after the
// kubelet's pkg/kubelet/certificate/bootstrap: with nothing but a bootstrap
// kubeconfig (a low-privilege token, see mylib/bootstraptoken), a node
// generates a private key, asks the API server for a client certificate with
// a CertificateSigningRequest, waits until it is approved and signed, and
// writes the kubeconfig it will use from then on.
//
//	res, err := bootstrap.LoadClientCert(ctx, bootstrap.Config{
//		BootstrapKubeconfig: statedir.Path(dir, statedir.BootstrapKubeconfig),
//		Kubeconfig:          statedir.Path(dir, statedir.NodeKubeconfig),
//		CertDir:             filepath.Dir(statedir.Path(dir, statedir.ClientCertCurrent)),
//		NodeName:            "node-1",
//		Out:                 os.Stdout,
//	})
package bootstrap

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"mykubelet/mylib/statedir"
)

const (
	// DefaultCertificateTimeout is how long the kubelet waits for its CSR to
	// be approved and signed (requestNodeCertificate's hour).
	DefaultCertificateTimeout = time.Hour
	// ClientCertPrefix names the files of the certificate store:
	// kubelet-client-<timestamp>.pem and the symlink kubelet-client-current.pem.
	ClientCertPrefix = "kubelet-client"
	// TmpPrivateKeyFile keeps the key in CertDir until the certificate arrives.
	TmpPrivateKeyFile = "kubelet-client.key.tmp"
)

// Config says where LoadClientCert reads and writes.
type Config struct {
	// BootstrapKubeconfig holds the bootstrap token. It is the only
	// credential LoadClientCert uses.
	BootstrapKubeconfig string
	// BootstrapCommand, when set, is the command that writes
	// BootstrapKubeconfig, named in the error when it is missing.
	BootstrapCommand string
	// Kubeconfig is the node kubeconfig to write (and to reuse while its
	// certificate is valid).
	Kubeconfig string
	// CertDir holds kubelet-client-current.pem (the kubelet's --cert-dir).
	CertDir string
	// NodeName goes into the certificate: CN=system:node:<NodeName>.
	NodeName string
	// Timeout bounds the whole exchange with the API server: sending the
	// CSR (connecting included) and waiting for approval and signing; 0
	// means DefaultCertificateTimeout.
	Timeout time.Duration
	// Clock tells whether a certificate is still valid; nil means the real clock.
	Clock clock.PassiveClock
	// Out receives one line per step, for a learner to read; nil discards them.
	Out io.Writer
}

// Result says what LoadClientCert did.
type Result struct {
	// Reused is true when the node kubeconfig was still valid and nothing
	// was requested.
	Reused bool
	// CSRName is the CertificateSigningRequest used (empty when Reused).
	CSRName string
	// Approval is the reason on the CSR's Approved condition: AutoApproved
	// when the controller manager approved it, KubectlApprove for
	// `kubectl certificate approve`.
	Approval string
	// Certificate is the node's client certificate.
	Certificate *x509.Certificate
	// CertFile is kubelet-client-current.pem (key and certificate).
	CertFile string
}

// NotApprovedError is returned when nobody approved (or the signer did not
// sign) the CSR before the timeout.
type NotApprovedError struct {
	CSRName string
	Timeout time.Duration
}

func (e *NotApprovedError) Error() string {
	return fmt.Sprintf("certificate signing request %s was not approved and signed within %s; approve it with `kubectl certificate approve %s` and run again (the key is kept, so the next run waits for the same CSR)", e.CSRName, e.Timeout, e.CSRName)
}

// LoadClientCert makes sure cfg.Kubeconfig holds a valid client certificate
// for the node. When it does, it returns at once (Reused). Otherwise it
// requests one with the bootstrap kubeconfig, stores it in
// CertDir/kubelet-client-current.pem and writes cfg.Kubeconfig pointing at it.
func LoadClientCert(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultCertificateTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	certFile := filepath.Join(cfg.CertDir, ClientCertPrefix+"-current.pem")

	// 1. Short-circuit when the node kubeconfig still works.
	cert, why := isClientConfigStillValid(cfg.Kubeconfig, NodeSubject(cfg.NodeName).CommonName, cfg.Clock.Now())
	if why == nil {
		fmt.Fprintf(out, "node kubeconfig: %s has a valid client certificate until %s: reusing it, no new CSR\n", cfg.Kubeconfig, cert.NotAfter.UTC().Format(time.RFC3339))
		return &Result{Reused: true, Certificate: cert, CertFile: certFile}, nil
	}
	if errors.Is(why, fs.ErrNotExist) {
		fmt.Fprintf(out, "node kubeconfig: %s does not exist yet: bootstrapping with %s\n", cfg.Kubeconfig, cfg.BootstrapKubeconfig)
	} else {
		fmt.Fprintf(out, "node kubeconfig: %s is not usable (%v): bootstrapping with %s\n", cfg.Kubeconfig, why, cfg.BootstrapKubeconfig)
	}

	// 2. The bootstrap credentials: nothing else is used from here on.
	if _, err := os.Stat(cfg.BootstrapKubeconfig); err != nil {
		if cfg.BootstrapCommand != "" {
			return nil, fmt.Errorf("no bootstrap kubeconfig at %s (run `%s` first): %w", cfg.BootstrapKubeconfig, cfg.BootstrapCommand, err)
		}
		return nil, fmt.Errorf("no bootstrap kubeconfig at %s: %w", cfg.BootstrapKubeconfig, err)
	}
	bootstrapConfig, err := clientcmd.BuildConfigFromFlags("", cfg.BootstrapKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load bootstrap kubeconfig %s: %w", cfg.BootstrapKubeconfig, err)
	}
	if bootstrapConfig.Insecure {
		return nil, fmt.Errorf("bootstrap kubeconfig %s skips TLS verification: the node would hand its token to whoever answers; give it the cluster's CA", cfg.BootstrapKubeconfig)
	}
	client, err := kubernetes.NewForConfig(bootstrapConfig)
	if err != nil {
		return nil, fmt.Errorf("client for bootstrap kubeconfig %s: %w", cfg.BootstrapKubeconfig, err)
	}

	// 3. The key, kept in a temporary file until the certificate arrives.
	if err := os.MkdirAll(cfg.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("create cert dir %s: %w", cfg.CertDir, err)
	}
	keyPath := filepath.Join(cfg.CertDir, TmpPrivateKeyFile)
	key, keyPEM, generated, err := LoadOrGenerateKeyFile(keyPath)
	if err != nil {
		return nil, err
	}
	if generated {
		fmt.Fprintf(out, "private key: generated %s (ECDSA P-256, PEM %q, mode 0600)\n", keyPath, ECPrivateKeyBlockType)
	} else {
		fmt.Fprintf(out, "private key: reusing %s from a run that did not get its certificate\n", keyPath)
	}

	// 4. Ask, then wait.
	res := &Result{CertFile: certFile}
	certPEM, err := requestNodeCertificate(ctx, client, bootstrapConfig.Host, key, keyPEM, cfg, out, res)
	if err != nil {
		return nil, err
	}

	// 5. Store key+certificate like the kubelet: kubelet-client-<time>.pem,
	// and the symlink kubelet-client-current.pem pointing at it.
	store, err := certificate.NewFileStore(ClientCertPrefix, cfg.CertDir, cfg.CertDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("certificate store in %s: %w", cfg.CertDir, err)
	}
	pair, err := store.Update(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("store node certificate in %s: %w", cfg.CertDir, err)
	}
	res.Certificate = pair.Leaf
	target, _ := os.Readlink(certFile) // only for the message below
	fmt.Fprintf(out, "certificate: wrote %s -> %s (CN=%s, O=%s, valid until %s)\n", certFile, filepath.Base(target),
		pair.Leaf.Subject.CommonName, strings.Join(pair.Leaf.Subject.Organization, ","), pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
	if err := os.Remove(keyPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		klog.V(2).InfoS("Could not remove the temporary private key", "path", keyPath, "err", err)
	}

	// 6. The node kubeconfig: same server and CA, the new certificate.
	if err := writeKubeconfigFromBootstrapping(bootstrapConfig, cfg.Kubeconfig, certFile); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "kubeconfig: wrote %s (mode 0600)\n", cfg.Kubeconfig)
	return res, nil
}

// requestNodeCertificate creates (or finds) the node's CSR and waits for the
// signed certificate, using client-go's util/certificate/csr:
//   - csr.RequestCertificateWithContext creates the CertificateSigningRequest;
//     when one with the same name exists it checks that it asks for the same
//     subject with the same key, and reuses it;
//   - csr.WaitForCertificate watches that one CSR (a field selector on its
//     name) until it carries both the Approved condition and
//     status.certificate; it fails at once if the CSR is denied, fails, is
//     deleted or replaced (another UID).
//
// cfg.Timeout bounds all of it, the first contact included: a server that
// accepts the connection and never answers fails the run within the timeout.
func requestNodeCertificate(parent context.Context, client kubernetes.Interface, server string, key *ecdsa.PrivateKey, keyPEM []byte, cfg Config, out io.Writer, res *Result) ([]byte, error) {
	ctx, cancel := context.WithTimeout(parent, cfg.Timeout)
	defer cancel()
	subject := NodeSubject(cfg.NodeName)
	csrPEM, err := MakeCSR(key, cfg.NodeName)
	if err != nil {
		return nil, err
	}
	name, err := CSRName(key.Public(), subject, NodeUsages)
	if err != nil {
		return nil, err
	}
	res.CSRName = name

	// Only to tell the learner whether this is a new CSR or a resumed one;
	// RequestCertificateWithContext handles both.
	_, getErr := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	existed := getErr == nil
	reqName, reqUID, err := csr.RequestCertificateWithContext(ctx, client, csrPEM, name,
		certificatesv1.KubeAPIServerClientKubeletSignerName, nil, NodeUsages, key)
	switch {
	case err != nil && parent.Err() != nil:
		return nil, fmt.Errorf("interrupted while sending certificate signing request %s: %w", name, parent.Err())
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("could not send certificate signing request %s to %s within %s (is the API server up and answering?): %w",
			name, server, cfg.Timeout, context.DeadlineExceeded)
	case err != nil:
		return nil, fmt.Errorf("certificate signing request %s: %w", name, err)
	}
	verb := "created"
	if existed {
		verb = "found"
	}
	fmt.Fprintf(out, "csr: %s %s for %s (signer %s, usages %s)\n", verb, reqName, subject.CommonName,
		certificatesv1.KubeAPIServerClientKubeletSignerName, joinUsages(NodeUsages))
	fmt.Fprintf(out, "csr: waiting up to %s for approval and signing (to approve by hand: kubectl certificate approve %s)\n", cfg.Timeout, reqName)

	certPEM, err := csr.WaitForCertificate(ctx, client, reqName, reqUID)
	switch {
	case err != nil && parent.Err() != nil:
		return nil, fmt.Errorf("interrupted while waiting for certificate signing request %s (it stays; run again to keep waiting for it): %w", reqName, parent.Err())
	case err != nil && wait.Interrupted(err):
		return nil, &NotApprovedError{CSRName: reqName, Timeout: cfg.Timeout}
	case err != nil:
		return nil, fmt.Errorf("certificate signing request %s: %w", reqName, err)
	}

	// Who approved it? The reason on the Approved condition says.
	if got, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, reqName, metav1.GetOptions{}); err == nil {
		for _, c := range got.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved {
				res.Approval = c.Reason
			}
		}
	} else {
		klog.V(2).InfoS("Could not read the approval of the CSR", "csr", reqName, "err", err)
	}
	if err := checkIssued(certPEM, key, subject.CommonName); err != nil {
		return nil, fmt.Errorf("certificate signing request %s: %w", reqName, err)
	}
	fmt.Fprintf(out, "csr: %s approved (%s) and signed\n", reqName, res.Approval)
	return certPEM, nil
}

// checkIssued verifies that the signed certificate is for our key and name.
func checkIssued(certPEM []byte, key *ecdsa.PrivateKey, commonName string) error {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != CertificateBlockType {
		return errors.New("the issued certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fmt.Errorf("parse the issued certificate: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return errors.New("the issued certificate is for another key")
	}
	if cert.Subject.CommonName != commonName {
		return fmt.Errorf("the issued certificate is for %q, want %q", cert.Subject.CommonName, commonName)
	}
	return nil
}

func joinUsages(us []certificatesv1.KeyUsage) string {
	s := make([]string, len(us))
	for i, u := range us {
		s[i] = string(u)
	}
	return strings.Join(s, ", ")
}

// writeKubeconfigFromBootstrapping writes a kubeconfig with the bootstrap
// kubeconfig's server and CA, and certFile as both certificate and key.
func writeKubeconfigFromBootstrapping(bootstrapConfig *rest.Config, path, certFile string) error {
	ca := bootstrapConfig.CAData
	if len(ca) == 0 && bootstrapConfig.CAFile != "" {
		b, err := os.ReadFile(bootstrapConfig.CAFile)
		if err != nil {
			return fmt.Errorf("read CA of the bootstrap kubeconfig: %w", err)
		}
		ca = b
	}
	abs, err := filepath.Abs(certFile)
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: bootstrapConfig.Host, CertificateAuthorityData: ca, TLSServerName: bootstrapConfig.ServerName}
	kc.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: abs, ClientKey: abs}
	kc.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: metav1.NamespaceDefault}
	kc.CurrentContext = "default-context"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("encode node kubeconfig %s: %w", path, err)
	}
	return statedir.WriteFile(path, b)
}

// isClientConfigStillValid returns the client certificate of the kubeconfig
// at path, or why it cannot be used: missing file (fs.ErrNotExist), no client
// certificate, a certificate that does not match its key, one for another
// user than commonName (the state dir of another --node-name), or one that is
// not valid at now.
func isClientConfigStillValid(path, commonName string, now time.Time) (*x509.Certificate, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	certPEM, keyPEM := cfg.CertData, cfg.KeyData
	if len(certPEM) == 0 && cfg.CertFile != "" {
		if certPEM, err = os.ReadFile(cfg.CertFile); err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
	}
	if len(keyPEM) == 0 && cfg.KeyFile != "" {
		if keyPEM, err = os.ReadFile(cfg.KeyFile); err != nil {
			return nil, fmt.Errorf("client key: %w", err)
		}
	}
	if len(certPEM) == 0 {
		return nil, errors.New("no client certificate in it")
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("client certificate and key: %w", err)
	}
	cert := pair.Leaf
	switch {
	case cert.Subject.CommonName != commonName:
		return nil, fmt.Errorf("its certificate is for %s, not %s", cert.Subject.CommonName, commonName)
	case now.After(cert.NotAfter):
		return nil, fmt.Errorf("client certificate expired at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(cert.NotBefore):
		return nil, fmt.Errorf("client certificate not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
	}
	return cert, nil
}
