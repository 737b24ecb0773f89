package fleet

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"regexp"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Removed counts what Cleanup deleted.
type Removed struct{ Nodes, Leases, CSRs int }

// Cleanup deletes fleet name's Nodes (those labelled LabelFleet=name), their
// Leases in kube-node-lease, and the CSRs its nodes made (those whose
// subject is system:node:<name>-NNNN). It needs a client allowed to do so
// (an admin's): the agents may delete none of it. The certificates in the
// state dir stay, so a new start reuses them.
func Cleanup(ctx context.Context, admin kubernetes.Interface, name string, out io.Writer) (Removed, error) {
	var r Removed
	nodes, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: LabelFleet + "=" + name})
	if err != nil {
		return r, fmt.Errorf("list nodes of fleet %s: %w", name, err)
	}
	for _, n := range nodes.Items {
		// The Lease first: it is owned by the Node, so once the Node is
		// gone the garbage collector deletes it too, racing us for it.
		err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, n.Name, metav1.DeleteOptions{})
		switch {
		case err == nil:
			r.Leases++
		case !apierrors.IsNotFound(err):
			return r, fmt.Errorf("delete lease %s/%s: %w", v1.NamespaceNodeLease, n.Name, err)
		}
		if err := admin.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return r, fmt.Errorf("delete node %s: %w", n.Name, err)
		}
		r.Nodes++
	}
	ours := regexp.MustCompile(`^system:node:` + regexp.QuoteMeta(name) + `-[0-9]{4}$`)
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, fmt.Errorf("list certificate signing requests: %w", err)
	}
	for _, c := range csrs.Items {
		block, _ := pem.Decode(c.Spec.Request)
		if block == nil {
			continue
		}
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil || !ours.MatchString(req.Subject.CommonName) {
			continue // not a CSR of this fleet
		}
		if err := admin.CertificatesV1().CertificateSigningRequests().Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return r, fmt.Errorf("delete certificate signing request %s: %w", c.Name, err)
		}
		r.CSRs++
	}
	fmt.Fprintf(out, "cleanup: fleet %s: deleted %d nodes, %d leases, %d certificate signing requests\n", name, r.Nodes, r.Leases, r.CSRs)
	return r, nil
}
