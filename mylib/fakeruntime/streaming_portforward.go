package fakeruntime

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PortForward is not implemented: nothing listens in a mock container.
// TODO(seam): port-forward to the servers in the pod's network.
func (r *Runtime) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, status.Error(codes.Unimplemented, "PortForward: the mock runtime's containers listen on no port, so there is nothing to forward to")
}
