package bootstraptoken

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"mykubelet/mylib/statedir"
)

// kubeadm names the user of its bootstrap-kubelet.conf this way.
const kubeconfigUser = "tls-bootstrap-token-user"

// Kubeconfig returns a bootstrap kubeconfig: the API server address and CA of
// admin (the admin kubeconfig the caller loaded), and tok as the credential.
// The CA is embedded, so the file works wherever it is copied. A kubeconfig
// that skips TLS verification is refused: a node must know it talks to the
// real API server before it hands over its token.
func Kubeconfig(admin *rest.Config, tok Token) (*clientcmdapi.Config, error) {
	if admin.Insecure {
		return nil, errors.New("the admin kubeconfig skips TLS verification (insecure-skip-tls-verify); give it the cluster's CA (certificate-authority-data) so the bootstrap kubeconfig can verify the API server")
	}
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		b, err := os.ReadFile(admin.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the admin kubeconfig's CA: %w", err)
		}
		ca = b
	}
	// An empty CA means the system's trust store, as with kubectl.
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = &clientcmdapi.Cluster{
		Server:                   admin.Host,
		CertificateAuthorityData: ca,
		TLSServerName:            admin.ServerName,
	}
	kc.AuthInfos[kubeconfigUser] = &clientcmdapi.AuthInfo{Token: tok.String()}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: kubeconfigUser}
	kc.CurrentContext = "default"
	return kc, nil
}

// WriteKubeconfig writes the bootstrap kubeconfig to path with mode 0600.
func WriteKubeconfig(path string, admin *rest.Config, tok Token) error {
	kc, err := Kubeconfig(admin, tok)
	if err != nil {
		return err
	}
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("encode bootstrap kubeconfig %s: %w", path, err)
	}
	return statedir.WriteFile(path, b)
}

// TokenFromKubeconfig returns the bootstrap token in the kubeconfig at path
// (as WriteKubeconfig wrote it). The error wraps os.ErrNotExist when there is
// no file.
func TokenFromKubeconfig(path string) (Token, error) {
	if _, err := os.Stat(path); err != nil {
		return Token{}, err
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return Token{}, fmt.Errorf("read bootstrap kubeconfig %s: %w", path, err)
	}
	ctx, ok := kc.Contexts[kc.CurrentContext]
	if !ok || kc.AuthInfos[ctx.AuthInfo] == nil {
		return Token{}, fmt.Errorf("bootstrap kubeconfig %s: no user in its current context %q", path, kc.CurrentContext)
	}
	tok, err := Parse(kc.AuthInfos[ctx.AuthInfo].Token)
	if err != nil {
		return Token{}, fmt.Errorf("bootstrap kubeconfig %s: %w", path, err)
	}
	return tok, nil
}
