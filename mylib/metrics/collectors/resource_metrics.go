// Package collectors is upstream's pkg/kubelet/metrics/collectors: the
// /metrics/resource endpoint's series, made from the summary at each
// scrape (what metrics-server reads for `kubectl top` and the HPA).
//
// As upstream, the series are a custom collector: nothing is stored
// between scrapes, so a container that is gone leaves no series behind,
// and each sample carries the time the runtime measured it. Where it
// departs from upstream, and why: each handler has a registry of its own
// (upstream registers into the kubelet's one server), because several
// kubelets may run in one process; the swap series are those of the
// summary, which the mock runtime leaves empty, so they are absent.
package collectors

import (
	"context"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// SummaryProvider is what the collector reads (stats.Provider).
type SummaryProvider interface {
	GetCPUAndMemoryStats(ctx context.Context) (*statsapi.Summary, error)
}

// NewResourceMetricsHandler serves /metrics/resource from p: a registry of
// its own holding NewResourceMetricsCollector(p), in the Prometheus text
// format (upstream's server.go does the same in its InstallMetrics...).
func NewResourceMetricsHandler(p SummaryProvider) http.Handler {
	r := metrics.NewKubeRegistry()
	r.CustomMustRegister(NewResourceMetricsCollector(p))
	return metrics.HandlerFor(r, metrics.HandlerOpts{ErrorHandling: metrics.ContinueOnError})
}

// The series, with upstream's names, help texts, labels and stability.
var (
	nodeCPUUsageDesc = metrics.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the node in core-seconds",
		nil, nil, metrics.STABLE, "")
	nodeMemoryUsageDesc = metrics.NewDesc("node_memory_working_set_bytes",
		"Current working set of the node in bytes",
		nil, nil, metrics.STABLE, "")
	nodeSwapUsageDesc = metrics.NewDesc("node_swap_usage_bytes",
		"Current swap usage of the node in bytes. Reported only on non-windows systems",
		nil, nil, metrics.ALPHA, "")
	containerCPUUsageDesc = metrics.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the container in core-seconds",
		[]string{"container", "pod", "namespace"}, nil, metrics.STABLE, "")
	containerMemoryUsageDesc = metrics.NewDesc("container_memory_working_set_bytes",
		"Current working set of the container in bytes",
		[]string{"container", "pod", "namespace"}, nil, metrics.STABLE, "")
	containerSwapUsageDesc = metrics.NewDesc("container_swap_usage_bytes",
		"Current amount of the container swap usage in bytes. Reported only on non-windows systems",
		[]string{"container", "pod", "namespace"}, nil, metrics.ALPHA, "")
	containerStartTimeDesc = metrics.NewDesc("container_start_time_seconds",
		"Start time of the container since unix epoch in seconds",
		[]string{"container", "pod", "namespace"}, nil, metrics.STABLE, "")
	podCPUUsageDesc = metrics.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative cpu time consumed by the pod in core-seconds",
		[]string{"pod", "namespace"}, nil, metrics.STABLE, "")
	podMemoryUsageDesc = metrics.NewDesc("pod_memory_working_set_bytes",
		"Current working set of the pod in bytes",
		[]string{"pod", "namespace"}, nil, metrics.STABLE, "")
	podSwapUsageDesc = metrics.NewDesc("pod_swap_usage_bytes",
		"Current amount of the pod swap usage in bytes. Reported only on non-windows systems",
		[]string{"pod", "namespace"}, nil, metrics.ALPHA, "")
	// scrape_error is the older name of resource_scrape_error (deprecated
	// in 1.29, still served).
	resourceScrapeResultDesc = metrics.NewDesc("scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise",
		nil, nil, metrics.ALPHA, "1.29.0")
	resourceScrapeErrorResultDesc = metrics.NewDesc("resource_scrape_error",
		"1 if there was an error while getting container metrics, 0 otherwise",
		nil, nil, metrics.STABLE, "")
)

// NewResourceMetricsCollector is upstream's: a metrics.StableCollector
// that asks p for a summary at each scrape.
func NewResourceMetricsCollector(p SummaryProvider) metrics.StableCollector {
	return &resourceMetricsCollector{provider: p}
}

type resourceMetricsCollector struct {
	metrics.BaseStableCollector
	provider SummaryProvider
}

var _ metrics.StableCollector = &resourceMetricsCollector{}

// DescribeWithStability implements metrics.StableCollector.
func (rc *resourceMetricsCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range []*metrics.Desc{nodeCPUUsageDesc, nodeMemoryUsageDesc, nodeSwapUsageDesc,
		containerStartTimeDesc, containerCPUUsageDesc, containerMemoryUsageDesc, containerSwapUsageDesc,
		podCPUUsageDesc, podMemoryUsageDesc, podSwapUsageDesc,
		resourceScrapeResultDesc, resourceScrapeErrorResultDesc} {
		ch <- d
	}
}

// CollectWithStability implements metrics.StableCollector: one summary,
// then the node's, each container's and each pod's samples; the two error
// gauges last, 1 when the summary could not be made.
func (rc *resourceMetricsCollector) CollectWithStability(ch chan<- metrics.Metric) {
	var errorCount float64
	defer func() {
		ch <- metrics.NewLazyConstMetric(resourceScrapeResultDesc, metrics.GaugeValue, errorCount)
		ch <- metrics.NewLazyConstMetric(resourceScrapeErrorResultDesc, metrics.GaugeValue, errorCount)
	}()
	s, err := rc.provider.GetCPUAndMemoryStats(context.Background())
	if err != nil {
		errorCount = 1
		klog.ErrorS(err, "Error getting summary for resourceMetric prometheus endpoint")
		return
	}

	n := s.Node
	if n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		ch <- counterAt(n.CPU.Time, nodeCPUUsageDesc, seconds(*n.CPU.UsageCoreNanoSeconds))
	}
	if n.Memory != nil && n.Memory.WorkingSetBytes != nil {
		ch <- gaugeAt(n.Memory.Time, nodeMemoryUsageDesc, float64(*n.Memory.WorkingSetBytes))
	}
	if n.Swap != nil && n.Swap.SwapUsageBytes != nil {
		ch <- gaugeAt(n.Swap.Time, nodeSwapUsageDesc, float64(*n.Swap.SwapUsageBytes))
	}

	for _, pod := range s.Pods {
		name, ns := pod.PodRef.Name, pod.PodRef.Namespace
		for _, c := range pod.Containers {
			if c.StartTime.Unix() > 0 {
				ch <- metrics.NewLazyConstMetric(containerStartTimeDesc, metrics.GaugeValue,
					float64(c.StartTime.UnixNano())/float64(time.Second), c.Name, name, ns)
			}
			if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
				ch <- counterAt(c.CPU.Time, containerCPUUsageDesc, seconds(*c.CPU.UsageCoreNanoSeconds), c.Name, name, ns)
			}
			if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
				ch <- gaugeAt(c.Memory.Time, containerMemoryUsageDesc, float64(*c.Memory.WorkingSetBytes), c.Name, name, ns)
			}
			if c.Swap != nil && c.Swap.SwapUsageBytes != nil {
				ch <- gaugeAt(c.Swap.Time, containerSwapUsageDesc, float64(*c.Swap.SwapUsageBytes), c.Name, name, ns)
			}
		}
		if pod.CPU != nil && pod.CPU.UsageCoreNanoSeconds != nil {
			ch <- counterAt(pod.CPU.Time, podCPUUsageDesc, seconds(*pod.CPU.UsageCoreNanoSeconds), name, ns)
		}
		if pod.Memory != nil && pod.Memory.WorkingSetBytes != nil {
			ch <- gaugeAt(pod.Memory.Time, podMemoryUsageDesc, float64(*pod.Memory.WorkingSetBytes), name, ns)
		}
		if pod.Swap != nil && pod.Swap.SwapUsageBytes != nil {
			ch <- gaugeAt(pod.Swap.Time, podSwapUsageDesc, float64(*pod.Swap.SwapUsageBytes), name, ns)
		}
	}
}

// seconds turns core-nanoseconds into core-seconds.
func seconds(nanos uint64) float64 { return float64(nanos) / float64(time.Second) }

// counterAt and gaugeAt are a sample stamped with the time the runtime
// measured it (the summary's Time), as upstream's; a zero Time leaves the
// sample unstamped (the scraper's time).
func counterAt(t metav1.Time, d *metrics.Desc, v float64, labels ...string) metrics.Metric {
	return stamped(t, metrics.NewLazyConstMetric(d, metrics.CounterValue, v, labels...))
}

func gaugeAt(t metav1.Time, d *metrics.Desc, v float64, labels ...string) metrics.Metric {
	return stamped(t, metrics.NewLazyConstMetric(d, metrics.GaugeValue, v, labels...))
}

func stamped(t metav1.Time, m metrics.Metric) metrics.Metric {
	if t.IsZero() {
		return m
	}
	return metrics.NewLazyMetricWithTimestamp(t.Time, m)
}
