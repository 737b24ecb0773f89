// Package bootstraptoken is the cluster side of TLS bootstrapping, as kubeadm
// sets it up (cmd/kubeadm/app/phases/bootstraptoken): a bootstrap token, the
// Secret in kube-system that makes the API server accept it, the RBAC that
// lets its holder ask for a node certificate, and a bootstrap kubeconfig that
// carries it.
//
// A bootstrap token is "<id>.<secret>": 6 then 16 characters from [a-z0-9].
// The API server's bootstrap token authenticator (--enable-bootstrap-token-auth)
// looks up the Secret kube-system/bootstrap-token-<id>, compares the secret
// part, and authenticates the caller as user system:bootstrap:<id> in group
// system:bootstrappers plus the Secret's auth-extra-groups.
//
// The id is public (it names the Secret); the secret part is a credential:
// this package never prints it, and it is written only to files of mode 0600.
//
// Setup does it all, as the bootstrap token program runs it:
//
//	res, err := bootstraptoken.Setup(ctx, adminClient, adminConfig, bootstraptoken.SetupOptions{
//		AutoApprove: true,
//		Kubeconfig:  statedir.Path(stateDir, statedir.BootstrapKubeconfig),
//		Out:         os.Stdout,
//	})
//
// or step by step:
//
//	tok, _ := bootstraptoken.Generate()
//	group := bootstraptoken.GroupFor(true)
//	_, _ = bootstraptoken.ApplySecret(ctx, cs, bootstraptoken.NewSecret(tok, []string{group}, time.Now().Add(bootstraptoken.DefaultTTL)))
//	for _, b := range bootstraptoken.Bindings(true) {
//		_, _ = bootstraptoken.EnsureClusterRoleBinding(ctx, cs, b)
//	}
//	_ = bootstraptoken.WriteKubeconfig(path, adminConfig, tok)
package bootstraptoken

import (
	"crypto/rand"
	"fmt"
	"io"
	"strings"
)

// The shape of a token, as k8s.io/cluster-bootstrap/token/api defines it.
const (
	// IDLength is the length of the public part, the token id.
	IDLength = 6
	// SecretLength is the length of the secret part.
	SecretLength = 16
	// alphabet is what both parts are made of.
	alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// Token is a bootstrap token. Its String form, "<id>.<secret>", is what goes
// into a kubeconfig and over the wire as "Authorization: Bearer <id>.<secret>".
type Token struct {
	ID     string
	Secret string
}

// String returns "<id>.<secret>". It is a credential: don't log it.
func (t Token) String() string { return t.ID + "." + t.Secret }

// SecretName is the name of the Secret in kube-system that holds this token:
// "bootstrap-token-<id>".
func (t Token) SecretName() string { return SecretNamePrefix + t.ID }

// Username is the user the API server authenticates this token as:
// "system:bootstrap:<id>".
func (t Token) Username() string { return BootstrapUserPrefix + t.ID }

// Generate returns a new random token. The randomness comes from crypto/rand,
// because the secret part is a password: math/rand would let anyone who saw
// a few tokens guess the next ones.
func Generate() (Token, error) { return GenerateFrom(rand.Reader) }

// GenerateFrom returns a token whose characters are drawn from r. Tests give
// it a fixed stream; everything else uses Generate.
func GenerateFrom(r io.Reader) (Token, error) {
	id, err := randomString(r, IDLength)
	if err != nil {
		return Token{}, fmt.Errorf("generate bootstrap token id: %w", err)
	}
	secret, err := randomString(r, SecretLength)
	if err != nil {
		return Token{}, fmt.Errorf("generate bootstrap token secret: %w", err)
	}
	return Token{ID: id, Secret: secret}, nil
}

// randomString draws n characters of alphabet from r, uniformly: a byte is
// used only when it is below 252 (7×36), so that "b % 36" favours no
// character; the few bytes above are thrown away and another is read.
func randomString(r io.Reader, n int) (string, error) {
	const limit = 256 - 256%len(alphabet) // 252
	out := make([]byte, 0, n)
	buf := make([]byte, n)
	for len(out) < n {
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if int(b) < limit && len(out) < n {
				out = append(out, alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return string(out), nil
}

// Parse checks that s has the form [a-z0-9]{6}.[a-z0-9]{16} and returns the
// token. The error says what is wrong without repeating the secret part.
func Parse(s string) (Token, error) {
	id, secret, found := strings.Cut(s, ".")
	switch {
	case !found:
		return Token{}, fmt.Errorf("malformed bootstrap token: want <id>.<secret>, %d and %d characters from [a-z0-9] joined by a dot (like abcdef.0123456789abcdef), got no dot", IDLength, SecretLength)
	case len(id) == SecretLength && len(secret) == IDLength:
		// Swapped parts: what stands before the dot is the secret; don't echo it.
		return Token{}, fmt.Errorf("malformed bootstrap token: %d characters before the dot and %d after: the parts look swapped, want <id>.<secret> (like abcdef.0123456789abcdef)", SecretLength, IDLength)
	case len(id) != IDLength:
		// Only the length: the part before the dot may be a secret.
		return Token{}, fmt.Errorf("malformed bootstrap token: the id before the dot must be %d characters from [a-z0-9] (like abcdef.0123456789abcdef), got %d characters", IDLength, len(id))
	case !onlyAlphabet(id):
		return Token{}, fmt.Errorf("malformed bootstrap token: the id %q before the dot must be %d characters from [a-z0-9] (like abcdef.0123456789abcdef)", id, IDLength)
	case len(secret) != SecretLength || !onlyAlphabet(secret):
		// Don't echo the secret part: it may be a real credential with a typo.
		return Token{}, fmt.Errorf("malformed bootstrap token %s.<secret>: the secret after the dot must be %d characters from [a-z0-9], got %d characters", id, SecretLength, len(secret))
	}
	return Token{ID: id, Secret: secret}, nil
}

func onlyAlphabet(s string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(alphabet, rune(s[i])) {
			return false
		}
	}
	return true
}
