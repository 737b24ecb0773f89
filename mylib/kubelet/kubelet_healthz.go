package kubelet

import "net/http"

// SyncLoopHealthCheck is upstream's syncloop check for /healthz.
func (kl *Kubelet) SyncLoopHealthCheck(_ *http.Request) error { return nil }

// PLEGHealthCheck is the PLEG's health for /healthz.
func (kl *Kubelet) PLEGHealthCheck(_ *http.Request) error { return nil }
