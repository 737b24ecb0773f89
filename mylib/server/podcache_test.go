package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "mykubelet/mylib/container"
)

func TestPodCacheEndpoint(t *testing.T) {
	pm := testManager()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	cache := kubecontainer.NewCache()
	s := NewDebugServer(pm)
	s.Handle(PodCachePattern, NewPodCacheHandler(pm, cache, clk))
	do := func(method, target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(method, "http://127.0.0.1:10255"+target, nil))
		return w
	}

	// A pod manager with UUID and hex UIDs.
	uuid := "59367ef6-1bb2-4057-ba10-e71328a2c94e"
	static := "0123456789abcdef0123456789abcdef"
	mirror := "11111111-2222-3333-4444-555555555555"
	p, _ := pm.GetPodByName("default", "nginx")
	pm.RemovePod(p)
	p = p.DeepCopy()
	p.UID = "59367ef6-1bb2-4057-ba10-e71328a2c94e"
	pm.AddPod(p)
	sp, _ := pm.GetPodByName("default", "web-n1")
	mp, _ := pm.GetMirrorPodByPod(sp)
	pm.RemovePod(sp)
	pm.RemovePod(mp)
	sp, mp = sp.DeepCopy(), mp.DeepCopy()
	sp.UID, mp.UID = "0123456789abcdef0123456789abcdef", "11111111-2222-3333-4444-555555555555"
	pm.AddPod(sp)
	pm.AddPod(mp)

	w := do("POST", "/podcache/"+uuid)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "pod cache: set a status for default/nginx (uid "+uuid+") at 10:00:00.000\n", w.Body.String())
	got, err := cache.GetNewerThan("59367ef6-1bb2-4057-ba10-e71328a2c94e", clk.Now().Add(-time.Nanosecond))
	require.NoError(t, err)
	assert.Equal(t, "nginx", got.Name, "the status is in the cache, newer than before")

	w = do("POST", "/podcache/"+mirror)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "default/web-n1 (uid "+static+")", "a mirror pod's UID means its static pod")

	for _, tc := range []struct {
		method, target string
		code           int
		body           string
	}{
		{"POST", "/podcache/not-a-uid", 400, `malformed pod UID "not-a-uid": want a UUID`},
		{"POST", "/podcache/59367EF6-1BB2-4057-BA10-E71328A2C94E", 400, "malformed pod UID"},
		{"POST", "/podcache/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 400, `unknown pod UID "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee": the pod manager has no such pod (see /pods)`},
		{"GET", "/podcache/" + uuid, 405, "method GET not allowed on /podcache/" + uuid + ": use POST (curl -X POST)"},
		{"POST", "/podcache/", 404, "no such page"},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			w := do(tc.method, tc.target)
			assert.Equal(t, tc.code, w.Code)
			assert.Contains(t, w.Body.String(), tc.body)
		})
	}
}
