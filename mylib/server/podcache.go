package server

import (
	"fmt"
	"net/http"
	"regexp"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	kubecontainer "mykubelet/mylib/container"
	kubepod "mykubelet/mylib/pod"
)

// podUID matches the UIDs pods have: an API server UUID, or a static pod's
// 32 hex digits.
var podUID = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$`)

// PodCachePattern is where NewPodCacheHandler is mounted.
const PodCachePattern = "/podcache/{uid}"

// NewPodCacheHandler answers POST /podcache/<uid>: it stores a fresh, empty
// status of the pod in the cache (as if the PLEG had just inspected it),
// which wakes a pod worker waiting in GetNewerThan. A mirror pod's UID is
// translated to its static pod's. Mount it with
// DebugServer.Handle(PodCachePattern, …).
func NewPodCacheHandler(pm kubepod.Manager, cache kubecontainer.Cache, clk clock.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			httpError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s: use POST (curl -X POST)", r.Method, r.URL.Path))
			return
		}
		raw := r.PathValue("uid")
		if !podUID.MatchString(raw) {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("malformed pod UID %q: want a UUID (kubectl get pod NAME -o jsonpath='{.metadata.uid}') or a static pod's 32 hex digits", raw))
			return
		}
		uid := pm.TranslatePodUID(types.UID(raw))
		pod, ok := pm.GetPodByUID(uid)
		if !ok {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("unknown pod UID %q: the pod manager has no such pod (see /pods)", raw))
			return
		}
		now := clk.Now()
		cache.Set(uid, &kubecontainer.PodStatus{ID: uid, Name: pod.Name, Namespace: pod.Namespace, TimeStamp: now}, nil, now)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "pod cache: set a status for %s/%s (uid %s) at %s\n", pod.Namespace, pod.Name, uid, now.Format("15:04:05.000"))
	})
}
