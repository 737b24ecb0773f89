package server

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	kubepod "mykubelet/mylib/pod"
	"mykubelet/mylib/stats"
)

// The kubelet's provider takes the cheaper path of only_cpu_and_memory.
var _ CPUAndMemorySummaryProvider = (*stats.Provider)(nil)

// fakeSummary answers a fixed summary and counts how it was asked.
type fakeSummary struct {
	s          *statsapi.Summary
	err        error
	gets       int
	lastUpdate bool
}

func (f *fakeSummary) Get(_ context.Context, updateStats bool) (*statsapi.Summary, error) {
	f.gets++
	f.lastUpdate = updateStats
	return f.s, f.err
}

// fakeCPUAndMemory also has the cheaper summary, which says who built it.
type fakeCPUAndMemory struct {
	fakeSummary
	cheap int
}

func (f *fakeCPUAndMemory) GetCPUAndMemoryStats(context.Context) (*statsapi.Summary, error) {
	f.cheap++
	return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "from GetCPUAndMemoryStats"}}, nil
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func u64(v uint64) *uint64 { return &v }

var t1 = metav1.NewTime(time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC))

func testSummary() *statsapi.Summary {
	cpu := &statsapi.CPUStats{Time: t1, UsageNanoCores: u64(250_000_000), UsageCoreNanoSeconds: u64(3_000_000_000)}
	mem := &statsapi.MemoryStats{Time: t1, WorkingSetBytes: u64(5 << 20)}
	fs := &statsapi.FsStats{Time: t1, UsedBytes: u64(4096)}
	return &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "n1", StartTime: t1, CPU: cpu, Memory: mem, Fs: fs,
			SystemContainers: []statsapi.ContainerStats{{Name: "kubelet", StartTime: t1, CPU: cpu, Memory: mem, Rootfs: fs}}},
		Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Name: "burner", Namespace: "default", UID: "uid-b"}, StartTime: t1,
			Containers: []statsapi.ContainerStats{{Name: "burn", StartTime: t1, CPU: cpu, Memory: mem, Rootfs: fs, Logs: fs}},
			CPU:        cpu, Memory: mem, EphemeralStorage: fs, VolumeStats: []statsapi.VolumeStats{{Name: "scratch", FsStats: *fs}}}},
	}
}

// nothingRuntime is a CRI client NewServer accepts; these tests never call it.
type nothingRuntime struct {
	runtimeapi.RuntimeServiceClient
}

// newTestServer is the real handler, with authn and authz in front, over cfg.
func newTestServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.NodeName, cfg.Pods, cfg.Runtime = "n1", kubepod.NewBasicPodManager(), nothingRuntime{}
	if cfg.Authenticator == nil {
		cfg.Authenticator, cfg.Authorizer = allowAll{}, allowAll{}
	}
	s, err := NewServer(cfg)
	require.NoError(t, err)
	return s
}

func request(h http.Handler, method, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, "https://127.0.0.1:10250"+target, nil))
	return w
}

// TestStatsSummaryNeedsNodesStats: /stats/summary is authorized as get
// nodes/stats (nodes/proxy does not come into it); a user allowed it gets
// the provider's summary in JSON, one who is not gets upstream's 403, and
// the provider is not asked.
func TestStatsSummaryNeedsNodesStats(t *testing.T) {
	p := &fakeSummary{s: testSummary()}
	var asked []string
	alice := fakeAuthn{u: User{Name: "alice"}, ok: true}
	allowed := newTestServer(t, Config{Summary: p, Authenticator: alice, Authorizer: fakeAuthz{allow: map[string]bool{"stats": true}, asked: &asked}})
	w := request(allowed, "GET", "/stats/summary")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.Equal(t, []string{"get nodes/stats n1"}, asked)
	assert.JSONEq(t, jsonOf(t, testSummary()), w.Body.String())
	assert.Contains(t, w.Body.String(), `"usageNanoCores": 250000000`, "the published JSON names")
	assert.Equal(t, 1, p.gets)
	assert.False(t, p.lastUpdate, "a scrape reads cached figures, as upstream's (updateStats false)")

	asked = nil
	bob := fakeAuthn{u: User{Name: "bob"}, ok: true}
	denied := newTestServer(t, Config{Summary: p, Authenticator: bob, Authorizer: fakeAuthz{allow: map[string]bool{"proxy": true, "metrics": true}, asked: &asked}})
	w = request(denied, "GET", "/stats/summary")
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Equal(t, "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[stats])\n", w.Body.String())
	assert.Equal(t, []string{"get nodes/stats n1"}, asked)
	assert.Equal(t, 1, p.gets, "a refused request reads nothing")

	w = request(denied, "POST", "/stats/summary")
	assert.Equal(t, "Forbidden (user=bob, verb=create, resource=nodes, subresource(s)=[stats])\n", w.Body.String(), "POST is create")
}

func TestStatsSummaryErrorIsInternalError(t *testing.T) {
	s := newTestServer(t, Config{Summary: &fakeSummary{err: errors.New("rpc error: code = Unavailable desc = the runtime is down")}})
	w := request(s, "GET", "/stats/summary")
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Equal(t, "Internal Error: rpc error: code = Unavailable desc = the runtime is down\n", w.Body.String())
}

// TestStatsSummaryOnlyCPUAndMemory: only_cpu_and_memory=true (exactly)
// asks the provider's GetCPUAndMemoryStats when it has one; otherwise the
// whole summary is cut down to names, times, CPU and memory.
func TestStatsSummaryOnlyCPUAndMemory(t *testing.T) {
	cheap := &fakeCPUAndMemory{fakeSummary: fakeSummary{s: testSummary()}}
	s := newTestServer(t, Config{Summary: cheap})
	w := request(s, "GET", "/stats/summary?only_cpu_and_memory=true")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), "from GetCPUAndMemoryStats")
	assert.Equal(t, 1, cheap.cheap)
	assert.Equal(t, 0, cheap.gets)
	for _, q := range []string{"", "?only_cpu_and_memory=false", "?only_cpu_and_memory=1", "?only_cpu_and_memory=true&only_cpu_and_memory=true"} {
		request(s, "GET", "/stats/summary"+q)
	}
	assert.Equal(t, 1, cheap.cheap, "only the exact true, once, as upstream")
	assert.Equal(t, 4, cheap.gets)

	r := httptest.NewRequest("POST", "/stats/summary", strings.NewReader(url.Values{"only_cpu_and_memory": {"true"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	s.ServeHTTP(w, r)
	assert.Equal(t, 2, cheap.cheap, "a POST's form says it too")

	plain := &fakeSummary{s: testSummary()}
	w = request(newTestServer(t, Config{Summary: plain}), "GET", "/stats/summary?only_cpu_and_memory=true")
	require.Equal(t, http.StatusOK, w.Code)
	full := testSummary()
	want := statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "n1", StartTime: t1, CPU: full.Node.CPU, Memory: full.Node.Memory,
			SystemContainers: []statsapi.ContainerStats{{Name: "kubelet", StartTime: t1, CPU: full.Node.CPU, Memory: full.Node.Memory}}},
		Pods: []statsapi.PodStats{{PodRef: full.Pods[0].PodRef, StartTime: t1, CPU: full.Node.CPU, Memory: full.Node.Memory,
			Containers: []statsapi.ContainerStats{{Name: "burn", StartTime: t1, CPU: full.Node.CPU, Memory: full.Node.Memory}}}},
	}
	assert.JSONEq(t, jsonOf(t, want), w.Body.String(), "no fs, volumes or ephemeral storage")
	assert.NotNil(t, testSummary().Pods[0].EphemeralStorage, "the provider's summary is not changed")
}

// TestMetricsEndpointsNeedNodesMetrics: the three metrics handlers are
// served at their paths, each authorized as get nodes/metrics.
func TestMetricsEndpointsNeedNodesMetrics(t *testing.T) {
	text := func(s string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, s) })
	}
	var asked []string
	alice := fakeAuthn{u: User{Name: "alice"}, ok: true}
	cfg := Config{Metrics: text("kubelet_running_pods 1\n"), ResourceMetrics: text("node_cpu_usage_seconds_total 3\n"),
		ProbeMetrics: text("prober_probe_total 2\n"), Authenticator: alice, Authorizer: fakeAuthz{allow: map[string]bool{"metrics": true}, asked: &asked}}
	s := newTestServer(t, cfg)
	for path, want := range map[string]string{"/metrics": "kubelet_running_pods 1\n",
		"/metrics/resource": "node_cpu_usage_seconds_total 3\n", "/metrics/probes": "prober_probe_total 2\n"} {
		asked = nil
		w := request(s, "GET", path)
		assert.Equal(t, http.StatusOK, w.Code, path)
		assert.Equal(t, want, w.Body.String(), path)
		assert.Equal(t, []string{"get nodes/metrics n1"}, asked, path)
	}
	assert.Equal(t, http.StatusNotFound, request(s, "GET", "/metrics/cadvisor").Code, "no cAdvisor here")
	w := request(s, "GET", "/stats/summary")
	assert.Equal(t, http.StatusForbidden, w.Code, "nodes/metrics is not nodes/stats")
}

// TestNilEndpointsAre404: a Config without them serves none (the user may
// see everything: it is the mux that says no).
func TestNilEndpointsAre404(t *testing.T) {
	s := newTestServer(t, Config{})
	for _, path := range []string{"/stats/summary", "/metrics", "/metrics/resource", "/metrics/probes", "/configz"} {
		w := request(s, "GET", path)
		assert.Equal(t, http.StatusNotFound, w.Code, path)
		assert.Equal(t, "404 page not found\n", w.Body.String(), path)
	}
}

// TestConfigzIsTheKubeletConfigurationAsJSON: /configz is
// {"kubeletconfig": …}, read at each request, authorized as nodes/configz
// (then nodes/proxy).
func TestConfigzIsTheKubeletConfigurationAsJSON(t *testing.T) {
	type kc struct {
		Kind          string `json:"kind"`
		SyncFrequency string `json:"syncFrequency"`
		MaxPods       int    `json:"maxPods"`
	}
	cur := kc{Kind: "KubeletConfiguration", SyncFrequency: "1m0s", MaxPods: 110}
	var asked []string
	alice := fakeAuthn{u: User{Name: "alice"}, ok: true}
	s := newTestServer(t, Config{Configz: func() any { return cur }, Authenticator: alice,
		Authorizer: fakeAuthz{allow: map[string]bool{"configz": true}, asked: &asked}})
	w := request(s, "GET", "/configz")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	assert.JSONEq(t, `{"kubeletconfig":{"kind":"KubeletConfiguration","syncFrequency":"1m0s","maxPods":110}}`, w.Body.String())
	assert.Equal(t, []string{"get nodes/configz n1"}, asked)
	cur.MaxPods = 20
	assert.Contains(t, request(s, "GET", "/configz").Body.String(), `"maxPods":20`, "read at each request")

	s = newTestServer(t, Config{Configz: func() any { return func() {} }})
	w = request(s, "GET", "/configz")
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.True(t, strings.HasPrefix(w.Body.String(), "error marshaling json: "), w.Body.String())
}

// TestStatsSummaryThroughTokenReviewAndSubjectAccessReview: the webhook
// authenticator and authorizer the kubelet runs with (NewWebhookAuth),
// over an API server that knows two tokens and lets alice, not bob, get
// nodes/stats of n1: alice reads the summary, bob gets the 403 and the
// API server was asked exactly upstream's question.
func TestStatsSummaryThroughTokenReviewAndSubjectAccessReview(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if name, ok := map[string]string{"alice-token": "alice", "bob-token": "bob"}[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: name, Groups: []string{"system:authenticated"}}}
		}
		return true, tr, nil
	})
	var questions []authorizationv1.ResourceAttributes
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := *sar.Spec.ResourceAttributes
		questions = append(questions, ra)
		sar.Status.Allowed = sar.Spec.User == "alice" && ra == authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "stats", Name: "n1"}
		return true, sar, nil
	})
	authn, authz, err := NewWebhookAuth(cs, testCAPEM(t))
	require.NoError(t, err)
	s := newTestServer(t, Config{Summary: &fakeSummary{s: testSummary()}, Authenticator: authn, Authorizer: authz})
	as := func(token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "https://127.0.0.1:10250/stats/summary", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}

	w := as("alice-token")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.JSONEq(t, jsonOf(t, testSummary()), w.Body.String())
	w = as("bob-token")
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Equal(t, "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[stats])\n", w.Body.String())
	want := authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "stats", Name: "n1"}
	assert.Equal(t, []authorizationv1.ResourceAttributes{want, want}, questions)
	assert.Equal(t, http.StatusUnauthorized, as("nobody").Code)
}

// testCAPEM is a CA bundle NewWebhookAuth accepts (no client certificate
// is sent in these tests).
func testCAPEM(t *testing.T) []byte {
	ca, _ := testCA(t, "cluster-ca")
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
}
