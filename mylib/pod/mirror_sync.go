package pod

import (
	"context"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/kubetypes"
)

// MirrorAction says what SyncMirrorPod did.
type MirrorAction string

// The outcomes of SyncMirrorPod.
const (
	MirrorUnchanged MirrorAction = ""
	// MirrorCreated: there was no mirror pod.
	MirrorCreated MirrorAction = "created"
	// MirrorRecreated: the mirror pod was being deleted (someone ran
	// kubectl delete); it was removed at once and created again.
	MirrorRecreated MirrorAction = "recreated"
	// MirrorReplaced: the mirror pod carried an old hash (the manifest
	// changed); it was deleted and created from the new static pod.
	MirrorReplaced MirrorAction = "replaced"
)

// SyncMirrorPod makes the API server's mirror pod match the static pod pod.
// mirrorPod is the mirror pod as last seen (nil if none). This is the step
// of the kubelet's SyncPod for static pods:
//
//   - a mirror pod that is being deleted, or mirrors an older version of the
//     static pod, is deleted (grace 0, only that UID);
//   - then, if there is none, one is created.
func SyncMirrorPod(ctx context.Context, mc MirrorClient, pod, mirrorPod *v1.Pod) (MirrorAction, error) {
	action := MirrorCreated
	if mirrorPod != nil {
		deleting := mirrorPod.DeletionTimestamp != nil
		if !deleting && IsMirrorPodOf(mirrorPod, pod) {
			return MirrorUnchanged, nil
		}
		uid := mirrorPod.UID
		if _, err := mc.DeleteMirrorPod(ctx, kubetypes.GetPodFullName(mirrorPod), &uid); err != nil {
			return MirrorUnchanged, err
		}
		action = MirrorReplaced
		if deleting {
			action = MirrorRecreated
		}
	}
	if err := mc.CreateMirrorPod(ctx, pod); err != nil {
		if errors.Is(err, ErrMirrorPodExists) {
			return MirrorUnchanged, nil // created earlier; our view had not caught up
		}
		return MirrorUnchanged, err
	}
	return action, nil
}

// OrphanedMirrorPods returns the full names of mirrorPods that mirror none
// of the static pods (their manifest was removed): the kubelet's
// housekeeping deletes them (deleteOrphanedMirrorPods).
func OrphanedMirrorPods(staticPods, mirrorPods []*v1.Pod) []string {
	static := map[string]bool{}
	for _, p := range staticPods {
		static[kubetypes.GetPodFullName(p)] = true
	}
	var orphans []string
	for _, m := range mirrorPods {
		if name := kubetypes.GetPodFullName(m); kubetypes.IsMirrorPod(m) && !static[name] {
			orphans = append(orphans, name)
		}
	}
	return orphans
}

// DeleteOrphanedMirrorPods deletes the mirror pods named in podFullNames
// (their static pod is gone), as the kubelet's housekeeping does, and
// writes one line to out for each one deleted. Errors are joined; the next
// housekeeping retries.
func DeleteOrphanedMirrorPods(ctx context.Context, mc MirrorClient, podFullNames []string, out io.Writer) error {
	var errs []error
	for _, name := range podFullNames {
		deleted, err := mc.DeleteMirrorPod(ctx, name, nil)
		if err != nil {
			errs = append(errs, err)
		} else if deleted {
			n, ns, _ := kubetypes.ParsePodFullName(name)
			fmt.Fprintf(out, "mirror pod %s/%s deleted (its manifest is gone)\n", ns, n)
		}
	}
	return errors.Join(errs...)
}

// SyncMirrorPods is the mirror pod housekeeping of a kubelet without pod
// workers: it gives every static pod in staticPods its current mirror pod
// (SyncMirrorPod) and deletes the mirror pods in mirrorPods that mirror none
// of them. One line per change goes to out; errors are joined.
func SyncMirrorPods(ctx context.Context, mc MirrorClient, staticPods, mirrorPods []*v1.Pod, out io.Writer) error {
	mirrors := map[string]*v1.Pod{}
	for _, m := range mirrorPods {
		mirrors[kubetypes.GetPodFullName(m)] = m
	}
	var errs []error
	for _, p := range staticPods {
		action, err := SyncMirrorPod(ctx, mc, p, mirrors[kubetypes.GetPodFullName(p)])
		if err != nil {
			errs = append(errs, err)
		} else if action != MirrorUnchanged {
			fmt.Fprintf(out, "mirror pod %s/%s %s\n", p.Namespace, p.Name, action)
		}
	}
	errs = append(errs, DeleteOrphanedMirrorPods(ctx, mc, OrphanedMirrorPods(staticPods, mirrorPods), out))
	return errors.Join(errs...)
}
