package token

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeAPI answers "create serviceaccounts/token" as the API server does:
// a new token whose expiry is now + the asked lifetime.
type fakeAPI struct {
	clock *testingclock.FakeClock
	mu    sync.Mutex
	n     int
	fail  bool
}

func (f *fakeAPI) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *fakeAPI) setFail(b bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = b
}

func newManager(t *testing.T) (*Manager, *fakeAPI, *testingclock.FakeClock) {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	api := &fakeAPI{clock: clk}
	client := fake.NewClientset()
	client.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		api.mu.Lock()
		defer api.mu.Unlock()
		if api.fail {
			return true, nil, errors.New("the API is down")
		}
		api.n++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		tr.Status.Token = fmt.Sprintf("token-%d", api.n)
		tr.Status.ExpirationTimestamp = metav1.NewTime(clk.Now().Add(time.Duration(*tr.Spec.ExpirationSeconds) * time.Second))
		return true, tr, nil
	})
	return NewManager(client, clk), api, clk
}

func request(uid types.UID, exp int64, aud ...string) *authenticationv1.TokenRequest {
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: aud, ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "p", UID: uid},
	}}
}

func get(t *testing.T, m *Manager, tr *authenticationv1.TokenRequest) string {
	t.Helper()
	out, err := m.GetServiceAccountToken("ns", "default", tr)
	if err != nil {
		t.Fatal(err)
	}
	return out.Status.Token
}

func TestRefreshAfter80PercentOfTTL(t *testing.T) {
	m, api, clk := newManager(t)
	tr := request("uid-1", 3600)
	if tok := get(t, m, tr); tok != "token-1" {
		t.Fatalf("token %s", tok)
	}
	// 80% of 3600 s is 2880 s; the jitter makes it up to 10 s earlier.
	clk.Step(2860 * time.Second)
	if tok := get(t, m, tr); tok != "token-1" || api.requests() != 1 {
		t.Errorf("at 2860 s: %s after %d requests, want the cached token-1", tok, api.requests())
	}
	clk.Step(30 * time.Second) // 2890 s
	if tok := get(t, m, tr); tok != "token-2" || api.requests() != 2 {
		t.Errorf("at 2890 s: %s after %d requests, want a fresh token-2", tok, api.requests())
	}
}

func TestRefreshAfter24Hours(t *testing.T) {
	m, api, clk := newManager(t)
	tr := request("uid-1", 7*24*3600) // a week: 80% is far beyond a day
	get(t, m, tr)
	clk.Step(24*time.Hour - 20*time.Second)
	get(t, m, tr)
	if api.requests() != 1 {
		t.Errorf("refreshed before 24 h (%d requests)", api.requests())
	}
	clk.Step(21 * time.Second)
	if tok := get(t, m, tr); tok != "token-2" {
		t.Errorf("after 24 h: %s, want token-2", tok)
	}
}

func TestOneTokenPerBoundPodAndAudience(t *testing.T) {
	m, api, _ := newManager(t)
	get(t, m, request("uid-1", 3600))
	get(t, m, request("uid-2", 3600))
	get(t, m, request("uid-1", 3600, "vault"))
	get(t, m, request("uid-1", 3600))
	if api.requests() != 3 {
		t.Errorf("%d requests, want 3 (two pods, two audiences; the repeat is cached)", api.requests())
	}
}

func TestDeleteServiceAccountTokenDropsThePodsTokens(t *testing.T) {
	m, api, _ := newManager(t)
	get(t, m, request("uid-1", 3600))
	get(t, m, request("uid-2", 3600))
	m.DeleteServiceAccountToken("uid-1")
	get(t, m, request("uid-1", 3600))
	get(t, m, request("uid-2", 3600))
	if api.requests() != 3 {
		t.Errorf("%d requests, want 3 (uid-1 asked again, uid-2 cached)", api.requests())
	}
}

func TestFailedRefreshKeepsTheTokenUntilItExpires(t *testing.T) {
	m, api, clk := newManager(t)
	tr := request("uid-1", 3600)
	get(t, m, tr)
	api.setFail(true)
	clk.Step(3000 * time.Second) // due for a refresh, not expired
	if tok := get(t, m, tr); tok != "token-1" {
		t.Errorf("got %s, want the cached token while it lives", tok)
	}
	clk.Step(601 * time.Second) // expired
	if _, err := m.GetServiceAccountToken("ns", "default", tr); err == nil || !strings.Contains(err.Error(), "expired and refresh failed") {
		t.Errorf("err = %v", err)
	}
	if _, err := m.GetServiceAccountToken("ns", "default", request("uid-9", 3600)); err == nil || !strings.Contains(err.Error(), "failed to fetch token") {
		t.Errorf("first fetch err = %v", err)
	}
}

func TestRunDropsExpiredTokens(t *testing.T) {
	m, _, clk := newManager(t)
	get(t, m, request("uid-1", 600))
	get(t, m, request("uid-2", 7200))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	size := func() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.cache) }
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(11 * time.Minute) // uid-1's token (10 min) expired, uid-2's lives
	deadline := time.Now().Add(30 * time.Second)
	for size() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("cache holds %d tokens, want 1", size())
		}
		time.Sleep(time.Millisecond)
	}
}
