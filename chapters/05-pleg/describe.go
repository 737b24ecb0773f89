package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/pleg"
)

// namer turns an event's pod UID and container ID into names, from the pod
// cache the PLEG has just updated; it remembers names of things since removed.
type namer struct {
	cache kubecontainer.Cache
	pods  map[types.UID]string
	ids   map[string]string // container or sandbox ID → "container=<name>" or "sandbox"
}

func newNamer(c kubecontainer.Cache) *namer {
	return &namer{cache: c, pods: map[types.UID]string{}, ids: map[string]string{}}
}

func (n *namer) describe(e *pleg.PodLifecycleEvent) string {
	exit := ""
	if st, err := n.cache.Get(e.ID); err == nil && st.Name != "" {
		n.pods[e.ID] = st.Namespace + "/" + st.Name
		for _, s := range st.SandboxStatuses {
			n.ids[s.Id] = "sandbox"
		}
		for _, cs := range st.ContainerStatuses {
			n.ids[cs.ID.ID] = "container=" + cs.Name
			if e.Type == pleg.ContainerDied && cs.ID.ID == e.Data && cs.State == kubecontainer.ContainerStateExited {
				exit = fmt.Sprintf(" exitCode=%d reason=%s", cs.ExitCode, cs.Reason)
			}
		}
	}
	pod := n.pods[e.ID]
	if pod == "" {
		pod = string(e.ID)
	}
	id, _ := e.Data.(string)
	if id == "" {
		return fmt.Sprintf("%s pod=%s", e.Type, pod)
	}
	what := n.ids[id]
	if what == "" {
		what = "container=?"
	}
	if len(id) > 13 {
		id = id[:13] // as crictl prints IDs
	}
	return fmt.Sprintf("%s pod=%s %s id=%s%s", e.Type, pod, what, id, exit)
}
