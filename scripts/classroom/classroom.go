// Command classroom is the instructor's side of a workshop on one shared
// cluster (the local one, kind, or any, through KUBECONFIG = an admin):
// one bootstrap token and bootstrap kubeconfig per learner, their
// revocation, and a status view of every learner's node. scripts/classroom.sh
// runs it.
//
//	classroom issue NAME…        one token + bootstrap kubeconfig each
//	classroom issue --count N    learner-01 … learner-NN
//	classroom revoke [NAME…]     delete their tokens (all when no NAME)
//	classroom status             every learner's node: Ready, chapter, pods
//
// A learner's node is the one their token asked a certificate for (the
// kubelet client CSR sent with it names the node), remembered in the Node's
// label mykubelet.dev/learner (LearnerLabel); failing that, the node named
// as the learner. Its progress through the chapters is read from the Node's
// annotation mykubelet.dev/chapter (ChapterAnnotation), which every chapter
// that runs as the node writes.
//
// The roster is the state directory's classroom/ folder: one folder per
// learner holding bootstrap-kubelet.kubeconfig (mode 0600).
package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mykubelet/mylib/bootstraptoken"
	"mykubelet/mylib/options"
	"mykubelet/mylib/statedir"
)

// ChapterAnnotation on a learner's Node says the last chapter that ran as
// it (written by the chapters: mylib/options.NodeAnnotations).
const ChapterAnnotation = options.ChapterAnnotation

// LearnerLabel on a token's Secret, and on the learner's Node, names the
// learner.
const LearnerLabel = "mykubelet.dev/learner"

// Classroom works on one cluster and one roster.
type Classroom struct {
	Client   kubernetes.Interface
	Admin    *rest.Config // its server and CA go into the bootstrap kubeconfigs
	StateDir string
	TTL      time.Duration // 0: bootstraptoken.DefaultTTL
	Out      io.Writer
}

func (c *Classroom) dir() string { return filepath.Join(c.StateDir, "classroom") }

// KubeconfigPath is the learner's bootstrap kubeconfig.
func (c *Classroom) KubeconfigPath(name string) string {
	return filepath.Join(c.dir(), name, statedir.BootstrapKubeconfig)
}

// Numbered returns learner-01 … learner-NN.
func Numbered(n int) []string {
	width := max(2, len(fmt.Sprint(n)))
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("learner-%0*d", width, i+1)
	}
	return names
}

// CheckName refuses a name that cannot be a Node's.
func CheckName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("learner name %q cannot name a node: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// Issue makes (or renews) one bootstrap token and kubeconfig per learner,
// and prints what to hand each one.
func (c *Classroom) Issue(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := CheckName(n); err != nil {
			return err
		}
	}
	for _, name := range names {
		path := c.KubeconfigPath(name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		res, err := bootstraptoken.Setup(ctx, c.Client, c.Admin, bootstraptoken.SetupOptions{TTL: c.TTL, AutoApprove: true, Kubeconfig: path})
		if err != nil {
			return fmt.Errorf("learner %s: %w", name, err)
		}
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, LearnerLabel, name)
		if _, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Patch(ctx, res.Token.SecretName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("learner %s: label token secret: %w", name, err)
		}
		fmt.Fprintf(c.Out, "learner %s: token %s (%s) valid until %s\n", name, res.Token.ID, res.Source, res.Expiration.Format(time.RFC3339))
		fmt.Fprintf(c.Out, "  hand over: %s\n", path)
		fmt.Fprintf(c.Out, "  the learner runs: go run ./chapters/03-tls-bootstrap --bootstrap-kubeconfig bootstrap-kubelet.kubeconfig --node-name %s\n", name)
	}
	fmt.Fprintf(c.Out, "server in the kubeconfigs: %s", c.Admin.Host)
	if strings.Contains(c.Admin.Host, "://127.") || strings.Contains(c.Admin.Host, "://localhost") {
		fmt.Fprint(c.Out, " (loopback: only learners on this machine can reach it)")
	}
	fmt.Fprintln(c.Out)
	return nil
}

// Roster lists the learners issued, sorted.
func (c *Classroom) Roster() ([]string, error) {
	entries, err := os.ReadDir(c.dir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// Revoke deletes the learners' tokens (every learner's when names is
// empty), the CSRs their tokens sent, and their bootstrap kubeconfigs. Nodes that already joined keep
// working: see the note it prints.
func (c *Classroom) Revoke(ctx context.Context, names []string) error {
	roster, err := c.Roster()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		names = roster
	}
	for _, name := range names {
		if !slices.Contains(roster, name) {
			return fmt.Errorf("no learner %s in %s", name, c.dir())
		}
		tok, err := bootstraptoken.TokenFromKubeconfig(c.KubeconfigPath(name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(c.Out, "learner %s: no bootstrap kubeconfig left\n", name)
		case err != nil:
			return err
		default:
			err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, tok.SecretName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("learner %s: delete token: %w", name, err)
			}
			csrs, err := c.deleteCSRs(ctx, tok.Username())
			if err != nil {
				return fmt.Errorf("learner %s: %w", name, err)
			}
			fmt.Fprintf(c.Out, "learner %s: token %s deleted, with the %d certificate request(s) it sent\n", name, tok.ID, csrs)
		}
		if err := os.RemoveAll(filepath.Join(c.dir(), name)); err != nil {
			return err
		}
	}
	fmt.Fprintln(c.Out, "note: a node that already joined keeps its client certificate, and with it the cluster: a token only lets a node ask for one.\n"+
		"  Kubernetes cannot revoke a certificate; it works until it expires (the signer's duration, a year by default), and a\n"+
		"  node that rotates renews it with itself. To end a node: stop its kubelet and `kubectl delete node NAME`.")
	return nil
}

// deleteCSRs deletes the CSRs username sent (the controller manager would
// an hour after they were signed) and returns how many.
func (c *Classroom) deleteCSRs(ctx context.Context, username string) (int, error) {
	list, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list CSRs: %w", err)
	}
	n := 0
	for _, csr := range list.Items {
		if csr.Spec.Username != username {
			continue
		}
		err := c.Client.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("delete CSR %s: %w", csr.Name, err)
		}
		n++
	}
	return n, nil
}

// Status prints one line per learner's node (one line with NODE "-" for a
// learner with none yet): token, node Ready, chapter, pods running.
func (c *Classroom) Status(ctx context.Context) error {
	roster, err := c.Roster()
	if err != nil {
		return err
	}
	csrs, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list CSRs: %w", err)
	}
	w := tabwriter.NewWriter(c.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "LEARNER\tTOKEN\tNODE\tREADY\tCHAPTER\tPODS RUNNING")
	for _, name := range roster {
		token := "missing"
		tok, tokErr := bootstraptoken.TokenFromKubeconfig(c.KubeconfigPath(name))
		if tokErr == nil {
			s, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, tok.SecretName(), metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				token = "expired"
			case err != nil:
				return err
			default:
				token = "until " + string(s.Data["expiration"])
			}
		}
		nodes, err := c.nodesOf(ctx, name, tok, csrs.Items)
		if err != nil {
			return err
		}
		if len(nodes) == 0 {
			fmt.Fprintf(w, "%s\t%s\t-\tno node\t-\t-\n", name, token)
		}
		for _, node := range nodes {
			ready, chapter := "Unknown", "-"
			for _, cond := range node.Status.Conditions {
				if cond.Type == v1.NodeReady {
					ready = string(cond.Status)
				}
			}
			if ch, ok := node.Annotations[ChapterAnnotation]; ok {
				chapter = ch
			}
			list, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name + ",status.phase=Running"})
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", name, token, node.Name, ready, chapter, len(list.Items))
		}
	}
	return w.Flush()
}

// nodesOf finds a learner's nodes, sorted by name. A learner picks the node's
// name when bootstrapping (--node-name), so it need not be theirs:
//   - a Node labelled LearnerLabel=learner is theirs;
//   - so is the Node named in a kubelet client CSR sent with their token
//     (spec.username system:bootstrap:<token id>, subject
//     system:node:<name>). Such a node gets the label, because the
//     controller manager deletes CSRs an hour after they were signed, and
//     the token goes with revoke;
//   - failing both, the Node named as the learner.
//
// The label is a note the admin writes, not a proof: a node may change its
// own labels outside kubernetes.io, so a learner's node could relabel itself.
func (c *Classroom) nodesOf(ctx context.Context, learner string, tok bootstraptoken.Token, csrs []certificatesv1.CertificateSigningRequest) ([]v1.Node, error) {
	labelled, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LearnerLabel + "=" + learner})
	if err != nil {
		return nil, fmt.Errorf("learner %s: list nodes: %w", learner, err)
	}
	found := map[string]v1.Node{}
	for _, n := range labelled.Items {
		found[n.Name] = n
	}
	if tok.ID != "" {
		for _, csr := range csrs {
			node := NodeOfCSR(&csr, tok.Username())
			if node == "" {
				continue
			}
			if _, ok := found[node]; ok {
				continue
			}
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, LearnerLabel, learner)
			n, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{})
			switch {
			case apierrors.IsNotFound(err): // certified, not registered (yet)
			case err != nil:
				return nil, fmt.Errorf("learner %s: label node %s: %w", learner, node, err)
			default:
				found[node] = *n
			}
		}
	}
	if len(found) == 0 {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, learner, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			found[n.Name] = *n
		}
	}
	nodes := make([]v1.Node, 0, len(found))
	for _, n := range found {
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	return nodes, nil
}

// NodeOfCSR returns the node name a kubelet client certificate request
// asks for (subject CN system:node:<name>) when username sent it, else "".
func NodeOfCSR(csr *certificatesv1.CertificateSigningRequest, username string) string {
	if csr.Spec.Username != username || csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return ""
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return ""
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return ""
	}
	name, ok := strings.CutPrefix(req.Subject.CommonName, "system:node:")
	if !ok {
		return ""
	}
	return name
}
