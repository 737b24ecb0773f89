package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mykubelet/mylib/kubetypes"
	kubepod "mykubelet/mylib/pod"
)

func testManager() kubepod.Manager {
	pm := kubepod.NewBasicPodManager()
	nginx := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Namespace: "default", UID: "api-uid",
		Annotations: map[string]string{kubetypes.ConfigSourceAnnotationKey: "api"}}, Status: v1.PodStatus{Phase: v1.PodPending}}
	static := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-n1", Namespace: "default", UID: "static-uid",
		Annotations: map[string]string{kubetypes.ConfigSourceAnnotationKey: "file", kubetypes.ConfigHashAnnotationKey: "static-uid"}}}
	mirror := static.DeepCopy()
	mirror.UID = "mirror-uid"
	mirror.Annotations[kubetypes.ConfigMirrorAnnotationKey] = "static-uid"
	pm.SetPods([]*v1.Pod{nginx, static, mirror})
	return pm
}

func do(t *testing.T, method, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "http://127.0.0.1:10255"+target, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	NewDebugServer(testManager()).ServeHTTP(w, r)
	return w
}

func TestPodsJSON(t *testing.T) {
	w := do(t, "GET", "/pods", nil)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var list v1.PodList
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &list))
	assert.Equal(t, "PodList", list.Kind)
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	assert.Equal(t, []string{"nginx", "web-n1"}, names, "pods, not mirror pods, sorted")
}

func TestPodsHTML(t *testing.T) {
	for name, w := range map[string]*httptest.ResponseRecorder{
		"Accept":      do(t, "GET", "/pods", map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}),
		"format=html": do(t, "GET", "/pods?format=html", nil),
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
			body := w.Body.String()
			assert.Contains(t, body, `<td><a href="/pods/default/nginx">nginx</a></td><td>api-uid</td><td>api</td><td>Pending</td><td></td>`)
			assert.Contains(t, body, `<td><a href="/pods/default/web-n1">web-n1</a></td><td>static-uid</td><td>file</td><td></td><td>mirror-uid</td>`)
		})
	}
	w := do(t, "GET", "/pods?format=json", map[string]string{"Accept": "text/html"})
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"), "?format wins over Accept")
}

func TestOnePod(t *testing.T) {
	w := do(t, "GET", "/pods/default/nginx", nil)
	require.Equal(t, http.StatusOK, w.Code)
	var p v1.Pod
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
	assert.Equal(t, "api-uid", string(p.UID))
	assert.Equal(t, "Pod", p.Kind)

	w = do(t, "GET", "/pods/default/web-n1?format=html", nil)
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), "UID static-uid, mirror pod UID mirror-uid")
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		code           int
		body           string
	}{
		{"GET", "/pods/default/nope", 404, "pod default/nope is not known to the pod manager\n"},
		{"GET", "/nope", 404, "no such page \"/nope\": try /pods or /pods/<namespace>/<name>\n"},
		{"GET", "/pods/default", 404, "no such page \"/pods/default\""},
		{"GET", "/pods/a/b/c", 404, "no such page"},
		{"POST", "/pods", 405, "method POST not allowed on /pods: use GET\n"},
		{"DELETE", "/pods/default/nginx", 405, "method DELETE not allowed"},
		{"GET", "/pods?format=xml", 400, "unknown format \"xml\": use ?format=json or ?format=html\n"},
		{"GET", "/pods/default/nginx?format=yaml", 400, "unknown format \"yaml\""},
	} {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			w := do(t, tc.method, tc.target, nil)
			assert.Equal(t, tc.code, w.Code)
			assert.True(t, strings.HasPrefix(w.Body.String(), tc.body), w.Body.String())
			if tc.code == 405 {
				assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))
			}
		})
	}
}

func TestEmptyList(t *testing.T) {
	w := httptest.NewRecorder()
	NewDebugServer(kubepod.NewBasicPodManager()).ServeHTTP(w, httptest.NewRequest("GET", "http://localhost:10255/pods", nil))
	assert.Contains(t, w.Body.String(), `"items": []`)
}

func TestListenLoopbackRefusesOtherAddresses(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", ":0"} {
		_, err := ListenLoopback("debug-address", addr)
		require.ErrorContains(t, err, "use 127.0.0.1 or localhost", addr)
	}
	_, err := ListenLoopback("debug-address", "no-port")
	require.ErrorContains(t, err, `--debug-address "no-port"`)
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		lis, err := ListenLoopback("debug-address", addr)
		require.NoError(t, err, addr)
		lis.Close()
	}
}
