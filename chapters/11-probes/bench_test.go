package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"mykubelet/scripts/testkit/chaptertest"
)

// BenchmarkReadinessToEndpoint measures, on a real control plane with this
// chapter's kubelet, how long after a readiness probe starts failing the
// Service's endpoint is marked not ready: the file an exec readiness probe
// (periodSeconds 1, failureThreshold 1) reads is removed through the
// control API, and the time runs until a watch on the EndpointSlices sees
// ready=false. It includes the wait for the next probe (up to the period),
// the pod worker's sync (up to a relist), the status manager's write and
// the EndpointSlice controller. Each iteration measures 10 failures, each
// at a random point of the probe's period, and reports p50 and p90.
func BenchmarkReadinessToEndpoint(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the mock runtime's pod network needs root")
	}
	f := &fixture{Fixture: chaptertest.NewFixture(b, "./chapters/11-probes", node)}
	ctx := context.Background()
	f.state = chaptertest.ShortTempDir(b)
	chaptertest.WriteNodeKubeconfig(b, f.state, f.NodeConfig)
	p := chaptertest.Start(b, f.Bin, "--node-name", node, "--state-dir", f.state, "--node-ip", "127.0.0.1",
		"--pod-cidr", fmt.Sprintf("10.%d.0.0/16", 100+os.Getpid()%100))
	control := p.WaitForSubmatch(`(?m)^control API: unix://(\S+) `, 0, 60*time.Second)[1]
	p.WaitForOutput(`(?m)^node `+node+`: status written`, 60*time.Second)

	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1}
	_, err := f.Admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "delay", Labels: map[string]string{"app": "delay"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox", Command: []string{"sh", "-c", "touch /tmp/healthy; sleep 3600"}, ReadinessProbe: probe}}}},
		metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	_, err = f.Admin.CoreV1().Services("default").Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "delay"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": "delay"}, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// until waits for the endpoint's ready condition to be want, through a watch.
	until := func(want string) time.Time {
		w, err := f.Admin.DiscoveryV1().EndpointSlices("default").Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=delay"})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		if f.endpointReady(b, "delay") == want {
			return time.Now()
		}
		timeout := time.After(2 * time.Minute)
		for {
			select {
			case e := <-w.ResultChan():
				if s, ok := e.Object.(*discoveryv1.EndpointSlice); ok {
					for _, ep := range s.Endpoints {
						if ep.Conditions.Ready != nil && fmt.Sprint(*ep.Conditions.Ready) == want {
							return time.Now()
						}
					}
				}
			case <-timeout:
				b.Fatalf("the endpoint's ready did not become %s", want)
			}
		}
	}
	until("true")
	var ds []time.Duration
	b.ResetTimer()
	for range b.N {
		for range 10 {
			// A random point of the probe's period, as a failure would come.
			time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
			t0 := time.Now()
			post(b, control, "/pods/default/delay/containers/c/exec?cmd=rm%20/tmp/healthy")
			ds = append(ds, until("false").Sub(t0))
			post(b, control, "/pods/default/delay/containers/c/exec?cmd=touch%20/tmp/healthy")
			until("true")
		}
	}
	b.StopTimer()
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*9/10].Milliseconds()), "p90-ms")
	p.Stop()
}
