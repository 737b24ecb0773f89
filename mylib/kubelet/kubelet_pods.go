package kubelet

// This file holds what upstream's pkg/kubelet/kubelet_pods.go does for one
// pod, as functions of explicit arguments: the pod's API status from what
// the runtime reports (generateAPIPodStatus, getPhase), and a container's
// environment (makeEnvironmentVariables). Departs from upstream:
//   - a container's ready and started come from the prober when
//     PodsConfig.Probes is set (generateAPIPodStatusProbed); without it a
//     running container is ready and started;
//   - a pod that skipped defaulting (enableServiceLinks nil) gets its
//     namespace's service variables, as the API server's default would
//     give (upstream refuses to build its environment);
//   - ConfigMaps and Secrets are read with a GET each (upstream caches them
//     with a watch); the node's credentials decide what may be read;
//   - no pod-level resources;
//   - the environment is sorted by name (upstream's order is a map's);
//   - startTime is set by the status manager, as upstream, not here.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	kubecontainer "mykubelet/mylib/container"
	"mykubelet/mylib/envvars"
	"mykubelet/mylib/kubetypes"
	kubelifecycle "mykubelet/mylib/lifecycle"
	"mykubelet/mylib/network/dns"
	"mykubelet/mylib/status"
)

// Waiting reasons the kubelet writes before a container exists.
const (
	ContainerCreating = "ContainerCreating"
	PodInitializing   = "PodInitializing"
	// ContainerReasonStatusUnknown: a container that ran is gone without a trace.
	ContainerReasonStatusUnknown = "ContainerStatusUnknown"
)

// getPhase computes the pod's phase from its spec and its containers'
// statuses (init and regular, in info). podIsTerminal says the kubelet
// will run nothing more for this pod; podHasInitialized that a regular
// container has run (so a sidecar restarting does not make the pod
// Pending again). As upstream, a sidecar (restartable init container)
// counts while it runs; once stopped, it does not count at all: a Job's
// pod whose main containers succeeded is Succeeded however its sidecars
// were stopped.
func getPhase(pod *v1.Pod, info []v1.ContainerStatus, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	spec := pod.Spec
	pendingRegularInit, pendingSidecars, failedInit := 0, 0, 0
	unknown, running, waiting, stopped, stoppedForGood, succeeded := 0, 0, 0, 0, 0, 0
	for _, c := range spec.InitContainers {
		s, ok := findStatus(info, c.Name)
		if kubecontainer.IsRestartableInitContainer(&c) {
			switch {
			case !ok:
				unknown++
			case s.State.Running != nil:
				if s.Started == nil || !*s.Started {
					pendingSidecars++
				}
				running++
			case s.State.Terminated != nil, s.State.Waiting != nil && s.LastTerminationState.Terminated != nil:
				// stopped, or about to restart: it does not count
			case s.State.Waiting != nil:
				pendingSidecars++
				waiting++
			default:
				pendingSidecars++
				unknown++
			}
			continue
		}
		if !ok {
			pendingRegularInit++
			continue
		}
		switch {
		case s.State.Running != nil:
			pendingRegularInit++
		case s.State.Terminated != nil:
			if code := s.State.Terminated.ExitCode; code != 0 && !kubecontainer.ContainerShouldRestart(&c, &spec, code) {
				failedInit++
			}
		case s.State.Waiting != nil:
			if s.LastTerminationState.Terminated != nil {
				if code := s.LastTerminationState.Terminated.ExitCode; code != 0 && !kubecontainer.ContainerShouldRestart(&c, &spec, code) {
					failedInit++
				}
			} else {
				pendingRegularInit++
			}
		default:
			pendingRegularInit++
		}
	}

	for _, c := range spec.Containers {
		s, ok := findStatus(info, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			stopped++
			if s.State.Terminated.ExitCode == 0 {
				succeeded++
			}
			if !kubecontainer.ContainerShouldRestart(&c, &spec, s.State.Terminated.ExitCode) {
				stoppedForGood++
			}
		case s.State.Waiting != nil:
			if t := s.LastTerminationState.Terminated; t != nil {
				stopped++ // it ran, and will run again unless its policy says not
				if !kubecontainer.ContainerShouldRestart(&c, &spec, t.ExitCode) {
					stoppedForGood++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}

	if failedInit > 0 {
		return v1.PodFailed // an init container failed and will not run again
	}
	switch {
	case pendingRegularInit > 0, pendingSidecars > 0 && !podHasInitialized, waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal && !kubetypes.IsStaticPod(pod) {
			// Nothing restarts any more, whatever the policy.
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		// Each container's restart policy (its own, its rules', else the
		// pod's) says whether it runs again.
		if stopped != stoppedForGood {
			return v1.PodRunning // restarting
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	}
	return v1.PodPending
}

func findStatus(statuses []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return v1.ContainerStatus{}, false
}

func isTerminalPhase(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// generateAPIPodStatus turns what the runtime reports about a pod into the
// status the API shows: container statuses, phase, conditions, IPs and QoS
// class. oldPodStatus is the last status the kubelet computed (from the
// status manager, or the pod's own); hostIPs are the node's addresses;
// reasons may be nil.
func generateAPIPodStatus(pod *v1.Pod, podStatus *kubecontainer.PodStatus, oldPodStatus v1.PodStatus, podIsTerminal bool, hostIPs []string, reasons *ReasonCache) v1.PodStatus {
	return generateAPIPodStatusProbed(pod, podStatus, oldPodStatus, podIsTerminal, hostIPs, reasons, nil, nil)
}

// podStatusProber sets the containers' started and ready from the probes
// (prober.Manager's UpdatePodStatus).
type podStatusProber interface {
	UpdatePodStatus(pod *v1.Pod, podStatus *v1.PodStatus)
}

// generateAPIPodStatusProbed is generateAPIPodStatus with the prober's word
// on each container's started and ready, before the pod's conditions are
// computed from them, as upstream; probes may be nil. allocs, when not
// nil, gives the containers' allocatedResources and resources
// (kubelet_resize.go).
func generateAPIPodStatusProbed(pod *v1.Pod, podStatus *kubecontainer.PodStatus, oldPodStatus v1.PodStatus, podIsTerminal bool, hostIPs []string, reasons *ReasonCache, probes podStatusProber, allocs containerAllocations) v1.PodStatus {
	if podStatus == nil { // nothing known from the runtime yet
		podStatus = &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	s := convertStatusToAPIStatus(pod, podStatus, oldPodStatus, reasons, allocs)
	if probes != nil {
		probes.UpdatePodStatus(pod, s)
	}
	all := append(append([]v1.ContainerStatus{}, s.ContainerStatuses...), s.InitContainerStatuses...)
	s.Phase = getPhase(pod, all, podIsTerminal, kubecontainer.HasAnyActiveRegularContainerStarted(&pod.Spec, podStatus))

	// A terminal phase is final. Unlike upstream, which lets the runtime's
	// word turn a Failed pod Succeeded, an old terminal phase also wins
	// over a new one: an evicted pod whose container exits 0 on SIGTERM
	// stays Failed (reason Evicted) rather than lose its reason.
	switch {
	case isTerminalPhase(oldPodStatus.Phase):
		s.Phase = oldPodStatus.Phase
	case isTerminalPhase(s.Phase):
	case isTerminalPhase(pod.Status.Phase):
		s.Phase = pod.Status.Phase
	}
	if s.Phase == oldPodStatus.Phase {
		s.Reason, s.Message = oldPodStatus.Reason, oldPodStatus.Message
	}

	// Conditions others own (e.g. readiness gates) are kept.
	for _, c := range pod.Status.Conditions {
		if !status.PodConditionByKubelet(c.Type) {
			s.Conditions = append(s.Conditions, c)
		}
	}
	s.Conditions = append(s.Conditions,
		status.GeneratePodReadyToStartContainersCondition(pod, podStatus),
		status.GeneratePodInitializedCondition(pod, all, s.Phase),
		status.GeneratePodReadyCondition(pod, s.Conditions, all, s.Phase),
		status.GenerateContainersReadyCondition(pod, all, s.Phase),
		v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	)
	// Which version of the pod's spec this status describes: the
	// generation the kubelet synced, on the status and on each condition
	// it generated, as upstream's (PodObservedGenerationTracking, GA).
	// A client that changed the spec waits for observedGeneration to
	// reach the generation it wrote, as for a Deployment's.
	s.ObservedGeneration = pod.Generation
	for i := range s.Conditions {
		if status.PodConditionByKubelet(s.Conditions[i].Type) {
			s.Conditions[i].ObservedGeneration = pod.Generation
		}
	}
	// The DisruptionTarget condition an eviction set is kept, as upstream:
	// it comes from a one-time event, not from the containers.
	for _, c := range oldPodStatus.Conditions {
		if c.Type == v1.DisruptionTarget {
			s.Conditions = replaceOrAppendPodCondition(s.Conditions, c)
		}
	}

	if len(hostIPs) > 0 {
		s.HostIP = hostIPs[0]
		for _, ip := range hostIPs {
			s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
		}
		if pod.Spec.HostNetwork && s.PodIP == "" {
			s.PodIP = hostIPs[0]
			for _, ip := range hostIPs {
				s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
			}
		}
	}
	return *s
}

// replaceOrAppendPodCondition puts c in conds, in place of one of its type.
func replaceOrAppendPodCondition(conds []v1.PodCondition, c v1.PodCondition) []v1.PodCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			conds[i] = c
			return conds
		}
	}
	return append(conds, c)
}

// convertStatusToAPIStatus fills IPs, QoS class and the container statuses.
func convertStatusToAPIStatus(pod *v1.Pod, podStatus *kubecontainer.PodStatus, oldPodStatus v1.PodStatus, reasons *ReasonCache, allocs containerAllocations) *v1.PodStatus {
	s := &v1.PodStatus{QOSClass: GetPodQOS(pod)}
	ips := podStatus.IPs // only a ready sandbox has them, as upstream
	for _, ip := range ips {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	s.ContainerStatuses = convertToAPIContainerStatuses(pod, podStatus, oldPodStatus.ContainerStatuses,
		pod.Spec.Containers, len(pod.Spec.InitContainers) > 0, false, reasons, allocs)
	s.InitContainerStatuses = convertToAPIContainerStatuses(pod, podStatus, oldPodStatus.InitContainerStatuses,
		pod.Spec.InitContainers, len(pod.Spec.InitContainers) > 0, true, reasons, allocs)
	s.EphemeralContainerStatuses = convertToAPIEphemeralContainerStatuses(pod, podStatus, oldPodStatus.EphemeralContainerStatuses, reasons)
	return s
}

// convertContainerStatus turns one runtime container status into the API's.
func convertContainerStatus(cs *kubecontainer.Status) *v1.ContainerStatus {
	cid := cs.ID.String()
	st := &v1.ContainerStatus{
		Name:         cs.Name,
		RestartCount: int32(cs.RestartCount),
		Image:        cs.Image,
		ImageID:      cs.ImageRef,
		ContainerID:  cid,
	}
	if st.ImageID == "" {
		st.ImageID = cs.ImageID
	}
	switch cs.State {
	case kubecontainer.ContainerStateRunning:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(cs.StartedAt)}
	case kubecontainer.ContainerStateExited:
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode: int32(cs.ExitCode), Reason: cs.Reason, Message: cs.Message,
			StartedAt: metav1.NewTime(cs.StartedAt), FinishedAt: metav1.NewTime(cs.FinishedAt), ContainerID: cid,
		}
	default: // created, or unknown: waiting to run
		st.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return st
}

// convertToAPIContainerStatuses builds the statuses of one list of
// containers (regular or init): a default waiting state, then the newest
// runtime status as State and the one before as LastTerminationState, then
// the reason of a failed start for a container about to be restarted.
// Ready and Started are set as a prober without probes would; the
// resources from allocs (nil: none) as kubelet_resize.go says.
func convertToAPIContainerStatuses(pod *v1.Pod, podStatus *kubecontainer.PodStatus, previous []v1.ContainerStatus,
	containers []v1.Container, hasInitContainers, isInitContainer bool, reasons *ReasonCache, allocs containerAllocations) []v1.ContainerStatus {
	old := make(map[string]v1.ContainerStatus, len(previous))
	for _, s := range previous {
		old[s.Name] = s
	}
	defaultWaiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ContainerCreating}}
	if hasInitContainers { // init containers too, as upstream
		defaultWaiting = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: PodInitializing}}
	}
	statuses := make(map[string]*v1.ContainerStatus, len(containers))
	for _, c := range containers {
		st := &v1.ContainerStatus{Name: c.Name, Image: c.Image, State: defaultWaiting}
		if o, ok := old[c.Name]; ok {
			if o.State.Terminated != nil {
				o := o
				st = &o
			} else {
				st.RestartCount, st.LastTerminationState = o.RestartCount, o.LastTerminationState
			}
		}
		statuses[c.Name] = st
	}

	// A container that was running and has vanished from the runtime
	// without a trace terminated: say so, instead of "waiting".
	for _, c := range containers {
		if podStatus.FindContainerStatusByName(c.Name) != nil {
			continue
		}
		o, ok := old[c.Name]
		if !ok || o.State.Terminated != nil || o.State.Running == nil {
			continue
		}
		st := statuses[c.Name]
		if st.State.Waiting == nil || st.State.Waiting.Reason != defaultWaiting.Waiting.Reason || st.LastTerminationState.Terminated != nil {
			continue
		}
		st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{Reason: ContainerReasonStatusUnknown,
			Message: "The container could not be located when the pod was deleted.  The container used to be Running", ExitCode: 137}
		if pod.DeletionTimestamp == nil {
			st.RestartCount++
		}
	}

	// Runtime statuses come newest first: the first per name is the
	// current state, the second the last termination.
	seen := map[string]int{}
	for _, cs := range podStatus.ContainerStatuses {
		if _, ok := statuses[cs.Name]; !ok || seen[cs.Name] >= 2 {
			continue
		}
		st := convertContainerStatus(cs)
		if seen[cs.Name] == 0 {
			o, ok := old[cs.Name]
			if ok && st.LastTerminationState.Terminated == nil {
				st.LastTerminationState = o.LastTerminationState
			}
			setContainerStatusResources(allocs, pod.UID, st, cs, o, ok)
			statuses[cs.Name] = st
		} else {
			statuses[cs.Name].LastTerminationState = st.State
		}
		seen[cs.Name]++
	}

	// A container that will be restarted and whose last start failed
	// waits with that failure as its reason.
	for i := range containers {
		c := &containers[i]
		if isInitContainer && !kubecontainer.IsRestartableInitContainer(c) {
			if cs := podStatus.FindContainerStatusByName(c.Name); cs != nil && cs.State == kubecontainer.ContainerStateExited && cs.ExitCode == 0 {
				continue
			}
		}
		if !kubecontainer.ShouldContainerBeRestarted(c, pod, podStatus) {
			continue
		}
		r, ok := reasons.Get(pod.UID, c.Name)
		if !ok {
			continue
		}
		st := statuses[c.Name]
		if st.State.Terminated != nil {
			st.LastTerminationState = st.State
		}
		st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: r.Err.Error(), Message: r.Message}}
	}

	out := make([]v1.ContainerStatus, 0, len(containers))
	for _, c := range containers { // the spec's order (upstream sorts regular ones by name; the status manager does)
		st := statuses[c.Name]
		running := st.State.Running != nil
		if isInitContainer && !kubecontainer.IsRestartableInitContainer(&c) {
			st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
		} else {
			st.Ready = running // a sidecar is ready as a regular container is
		}
		started := running
		st.Started = &started
		out = append(out, *st)
	}
	if !isInitContainer {
		sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	return out
}

// envSources are where makeEnvironmentVariables reads what a container's
// environment refers to: ConfigMaps and Secrets (the kubelet's watching
// managers, as upstream's configMapManager and secretManager), and the
// Node's allocatable (what a limits.* resourceFieldRef defaults to).
type envSources struct {
	configMap       func(namespace, name string) (*v1.ConfigMap, error)
	secret          func(namespace, name string) (*v1.Secret, error)
	nodeAllocatable func() (v1.ResourceList, error)
}

// clientEnvSources reads ConfigMaps, Secrets and the Node straight from
// the API server through client, the node's credentials.
func clientEnvSources(ctx context.Context, client kubernetes.Interface, nodeName string) envSources {
	return envSources{
		configMap: func(ns, name string) (*v1.ConfigMap, error) {
			return client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		},
		secret: func(ns, name string) (*v1.Secret, error) {
			return client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		},
		nodeAllocatable: func() (v1.ResourceList, error) {
			node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return node.Status.Allocatable, nil
		},
	}
}

// makeEnvironmentVariables builds a container's environment as the kubelet
// does: envFrom first (ConfigMaps and Secrets, with prefix, optional ones
// may be missing), then env in order, later names overriding earlier ones:
// literal values with $(VAR) expanded from what is defined so far, then
// from serviceEnv (getServiceEnvVarMap), or valueFrom: the downward API
// (fieldRef, resourceFieldRef with limits defaulting to the pod-level
// limit, else the Node's allocatable), configMapKeyRef, secretKeyRef;
// last, the service variables no envFrom or env entry defined. A ConfigMap or Secret that
// is missing (and not optional) is upstream's error as it is (`configmap
// "x" not found`); a missing key says which. Unlike upstream, the Node is
// read only when a limit defaults to its allocatable.
func makeEnvironmentVariables(pod *v1.Pod, container *v1.Container, podIP string, podIPs, hostIPs []string,
	src envSources, serviceEnv map[string]string) ([]kubecontainer.EnvVar, error) {
	env := map[string]string{}
	configMaps := map[string]*v1.ConfigMap{}
	secrets := map[string]*v1.Secret{}
	getConfigMap := func(name string) (*v1.ConfigMap, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, nil
		}
		cm, err := src.configMap(pod.Namespace, name)
		if err != nil {
			return nil, err
		}
		configMaps[name] = cm
		return cm, nil
	}
	getSecret := func(name string) (*v1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		s, err := src.secret(pod.Namespace, name)
		if err != nil {
			return nil, err
		}
		secrets[name] = s
		return s, nil
	}

	for _, from := range container.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := getConfigMap(from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, err
			}
			for k, v := range cm.Data {
				env[from.Prefix+k] = v
			}
		case from.SecretRef != nil:
			s, err := getSecret(from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, err
			}
			for k, v := range s.Data {
				env[from.Prefix+k] = string(v)
			}
		}
	}

	mapping := kubecontainer.MappingFuncFor(env, serviceEnv)
	for _, e := range container.Env {
		value := e.Value
		switch {
		case value != "":
			value = kubecontainer.Expand(value, mapping)
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			v, err := podFieldSelectorRuntimeValue(e.ValueFrom.FieldRef, pod, podIP, podIPs, hostIPs)
			if err != nil {
				return nil, err
			}
			value = v
		case e.ValueFrom.ResourceFieldRef != nil:
			v, err := containerResourceRuntimeValue(e.ValueFrom.ResourceFieldRef, pod, container, src.nodeAllocatable)
			if err != nil {
				return nil, err
			}
			value = v
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, err := getConfigMap(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
					continue
				}
				return nil, err
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if isTrue(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			value = v
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, err := getSecret(ref.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
					continue
				}
				return nil, err
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				if isTrue(ref.Optional) {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			value = string(v)
		}
		env[e.Name] = value
	}

	out := make([]kubecontainer.EnvVar, 0, len(env)+len(serviceEnv))
	for k, v := range env {
		out = append(out, kubecontainer.EnvVar{Name: k, Value: v})
	}
	for k, v := range serviceEnv {
		if _, defined := env[k]; !defined { // the container's own win
			out = append(out, kubecontainer.EnvVar{Name: k, Value: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// masterServices are the Services of namespace "default" every container
// learns of, whatever its pod's enableServiceLinks: the API server's own.
var masterServices = map[string]bool{"kubernetes": true}

// getServiceEnvVarMap is the service variables of a container in
// namespace ns (upstream's getServiceEnvVarMap): those of the
// "kubernetes" Service of "default", and, with enableServiceLinks, those
// of ns's Services with a cluster IP. A Service of ns named "kubernetes"
// takes the place of default's, as upstream. A nil lister gives none (upstream: a kubelet
// without an API server).
func getServiceEnvVarMap(lister corelisters.ServiceLister, ns string, enableServiceLinks bool) (map[string]string, error) {
	m := map[string]string{}
	if lister == nil {
		return m, nil
	}
	services, err := lister.List(labels.Everything())
	if err != nil {
		return m, fmt.Errorf("failed to list services when setting up env vars: %w", err)
	}
	serviceMap := map[string]*v1.Service{}
	for _, service := range services {
		if !envvars.IsServiceIPSet(service) {
			continue
		}
		switch {
		case service.Namespace == metav1.NamespaceDefault && masterServices[service.Name]:
			if _, taken := serviceMap[service.Name]; !taken {
				serviceMap[service.Name] = service
			}
		case service.Namespace == ns && enableServiceLinks:
			serviceMap[service.Name] = service
		}
	}
	mapped := make([]*v1.Service, 0, len(serviceMap))
	for _, s := range serviceMap {
		mapped = append(mapped, s)
	}
	for _, e := range envvars.FromServices(mapped) {
		m[e.Name] = e.Value
	}
	return m, nil
}

// podFieldSelectorRuntimeValue resolves a downward API fieldRef.
func podFieldSelectorRuntimeValue(fs *v1.ObjectFieldSelector, pod *v1.Pod, podIP string, podIPs, hostIPs []string) (string, error) {
	path := fs.FieldPath
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		if len(hostIPs) == 0 {
			return "", nil
		}
		return hostIPs[0], nil
	case "status.hostIPs":
		return strings.Join(hostIPs, ","), nil
	case "status.podIP":
		return podIP, nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", path)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// containerResourceRuntimeValue resolves a resourceFieldRef: the limit
// or request of the container (or of the pod's container it names),
// divided by the divisor and rounded up. A limit the container does not
// set (or sets to zero) is the pod's pod-level limit (spec.resources.limits)
// when it sets one, else the Node's allocatable, as upstream's
// defaultPodLimitsForDownwardAPI; the Node that cannot be read is
// upstream's error, pod-level limit or not.
func containerResourceRuntimeValue(fs *v1.ResourceFieldSelector, pod *v1.Pod, container *v1.Container, nodeAllocatable func() (v1.ResourceList, error)) (string, error) {
	if fs.ContainerName != "" && fs.ContainerName != container.Name {
		container = nil
		for _, cs := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range cs {
				if cs[i].Name == fs.ContainerName {
					container = &cs[i]
				}
			}
		}
		if container == nil {
			return "", fmt.Errorf("container %s not found", fs.ContainerName)
		}
	}
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, ok := strings.Cut(fs.Resource, ".")
	rn := v1.ResourceName(name)
	if !ok || (kind != "limits" && kind != "requests") ||
		(rn != v1.ResourceCPU && rn != v1.ResourceMemory && rn != v1.ResourceEphemeralStorage) {
		return "", fmt.Errorf("unsupported container resource : %s", fs.Resource)
	}
	var q resource.Quantity
	if kind == "limits" {
		q = container.Resources.Limits[rn]
		if q.IsZero() {
			if nodeAllocatable == nil {
				return "", errors.New("failed to find node object, expected a node")
			}
			alloc, err := nodeAllocatable()
			if err != nil {
				klog.ErrorS(err, "Cannot get the node's allocatable for the downward API", "pod", klog.KObj(pod))
				return "", errors.New("failed to find node object, expected a node")
			}
			q = alloc[rn]
			if pl := podLevelLimit(pod, rn); !pl.IsZero() {
				if _, ok := alloc[rn]; ok {
					q = pl
				}
			}
		}
	} else {
		q = container.Resources.Requests[rn]
	}
	if rn == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// podLevelLimit is the pod's pod-level limit of rn (zero if it sets none
// or rn is no pod-level resource).
func podLevelLimit(pod *v1.Pod, rn v1.ResourceName) resource.Quantity {
	if !kubelifecycle.IsPodLevelLimitsSet(pod) || !kubelifecycle.IsSupportedPodLevelResource(rn) {
		return resource.Quantity{}
	}
	return pod.Spec.Resources.Limits[rn]
}

// PodRuntimeHelper is what the runtime manager asks the kubelet about a
// pod (kubecontainer.RuntimeHelper): the environment from the API with the
// node's credentials, the mounts from the volume manager, the DNS from the
// DNS configurer, the hostname from the pod.
type PodRuntimeHelper struct {
	// Client reads ConfigMaps, Secrets and the Node (unless ConfigMaps,
	// Secrets or NodeAllocatable say otherwise): the node's credentials.
	Client kubernetes.Interface
	// HostIPs are the node's addresses (status.hostIP(s)).
	HostIPs []string
	// NodeName is the Node whose allocatable a resourceFieldRef limit the
	// container does not set defaults to; NodeAllocatable, if set, gives
	// it instead of reading the Node through Client.
	NodeName        string
	NodeAllocatable func() (v1.ResourceList, error)
	// ConfigMaps and Secrets read what env and envFrom refer to (the
	// kubelet's watching managers); nil reads them through Client.
	ConfigMaps func(namespace, name string) (*v1.ConfigMap, error)
	Secrets    func(namespace, name string) (*v1.Secret, error)
	// ClusterDomain for a pod with a subdomain; "cluster.local" if empty.
	ClusterDomain string
	// Volumes are the pod's mounted volumes (the volume manager's
	// GetMountedVolumesForPod). nil: containers mount nothing, not even
	// /etc/hosts or a termination-message file. Needs PodDir.
	Volumes func(*v1.Pod) kubecontainer.VolumeMap
	// NodeHostsFile is the node's hosts file a hostNetwork pod's
	// containers see (makeHostNetworkHostsMount); "": none.
	NodeHostsFile string
	// PodDir is the pod's directory, <root>/pods/<uid>: its etc-hosts,
	// its containers' termination-message files, its subPath links.
	PodDir func(types.UID) string
	// DNS computes the sandbox's resolver configuration; nil leaves it
	// to the runtime.
	DNS *dns.Configurer
	// PodCgroupParent is the pod's cgroup, the sandbox's CgroupParent
	// (Kubelet.GetPodCgroupParent); nil leaves it to the runtime.
	PodCgroupParent func(*v1.Pod) string
	// Services lists the cluster's Services for the service variables
	// (the kubelet's informer); nil: none, not even KUBERNETES_SERVICE_HOST.
	Services corelisters.ServiceLister
	// ServicesSynced says the Services were listed at least once; until
	// then a pod from the API server gets no environment (its container
	// waits with CreateContainerConfigError), so that no container starts
	// without KUBERNETES_SERVICE_HOST. nil: listed.
	ServicesSynced func() bool
}

var _ kubecontainer.RuntimeHelper = (*PodRuntimeHelper)(nil)

// GenerateRunContainerOptions computes the container's environment and,
// with Volumes, its mounts (makeMounts, imageVolumes the pod's pulled
// image volumes) and the directory of its termination-message file.
func (h *PodRuntimeHelper) GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, container *v1.Container, podIP string, podIPs []string, imageVolumes kubecontainer.ImageVolumes) (*kubecontainer.RunContainerOptions, error) {
	serviceEnv, err := h.serviceEnv(pod)
	if err != nil {
		return nil, err
	}
	src := clientEnvSources(ctx, h.Client, h.NodeName)
	if h.ConfigMaps != nil {
		src.configMap = h.ConfigMaps
	}
	if h.Secrets != nil {
		src.secret = h.Secrets
	}
	if h.NodeAllocatable != nil {
		src.nodeAllocatable = h.NodeAllocatable
	}
	envs, err := makeEnvironmentVariables(pod, container, podIP, podIPs, h.HostIPs, src, serviceEnv)
	if err != nil {
		return nil, err
	}
	opts := &kubecontainer.RunContainerOptions{Envs: envs}
	if h.Volumes == nil {
		return opts, nil
	}
	if h.PodDir == nil {
		return nil, fmt.Errorf("kubelet: PodRuntimeHelper.Volumes needs PodDir")
	}
	hostName, hostDomain, err := h.GeneratePodHostNameAndDomain(pod)
	if err != nil {
		return nil, err
	}
	podDir := h.PodDir(pod.UID)
	if opts.Mounts, err = makeMounts(pod, podDir, container, hostName, hostDomain, podIPs, h.Volumes(pod), envs, imageVolumes); err != nil {
		return nil, err
	}
	if pod.Spec.HostNetwork && h.NodeHostsFile != "" {
		m, err := makeHostNetworkHostsMount(pod, podDir, container, h.NodeHostsFile)
		if err != nil {
			return nil, err
		}
		if m != nil {
			opts.Mounts = append(opts.Mounts, *m)
		}
	}
	if container.TerminationMessagePath != "" && len(utilvalidation.IsDNS1123Label(container.Name)) == 0 {
		// 0755: the sandbox's user (65534) goes through it to the file.
		p := getPodContainerDir(podDir, container.Name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			klog.ErrorS(err, "Error on creating dir", "path", p) // as upstream: the container runs without the file
		} else {
			opts.PodContainerDir = p
		}
	}
	return opts, nil
}

// serviceEnv is the pod's service variables, once the Services were
// listed: a static pod does not wait for them (the API server may be away),
// as upstream's makeEnvironmentVariables.
func (h *PodRuntimeHelper) serviceEnv(pod *v1.Pod) (map[string]string, error) {
	if h.Services != nil && h.ServicesSynced != nil && !kubetypes.IsStaticPod(pod) && !h.ServicesSynced() {
		return nil, errors.New("services have not yet been read at least once, cannot construct envvars")
	}
	enableServiceLinks := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks // nil: the API's default, true
	return getServiceEnvVarMap(h.Services, pod.Namespace, enableServiceLinks)
}

// GetPodDNS is the sandbox's DNS configuration from DNS; nil (no
// Configurer) leaves it to the runtime.
func (h *PodRuntimeHelper) GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	if h.DNS == nil {
		return nil, nil
	}
	return h.DNS.GetPodDNS(pod)
}

// GetPodCgroupParent is PodCgroupParent's answer, or "".
func (h *PodRuntimeHelper) GetPodCgroupParent(pod *v1.Pod) string {
	if h.PodCgroupParent == nil {
		return ""
	}
	return h.PodCgroupParent(pod)
}

// GeneratePodHostNameAndDomain is the pod's hostname (spec.hostnameOverride
// with no domain; else spec.hostname, or its name; cut to 63 characters)
// and, with a subdomain, <subdomain>.<namespace>.svc.<cluster domain>.
func (h *PodRuntimeHelper) GeneratePodHostNameAndDomain(pod *v1.Pod) (string, string, error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		// A DNS subdomain, dots and all, and the whole name: `hostname -f`
		// answers it too (the API server refuses it beside hostNetwork or
		// setHostnameAsFQDN).
		if msgs := utilvalidation.IsDNS1123Subdomain(*o); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod HostnameOverride %q is not a valid DNS subdomain: %s", *o, strings.Join(msgs, ";"))
		}
		hostname, err := truncateHostname(pod.Name, *o)
		return hostname, "", err
	}
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := utilvalidation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Hostname %q is not a valid DNS label: %s", pod.Spec.Hostname, strings.Join(msgs, ";"))
		}
		hostname = pod.Spec.Hostname
	}
	hostname, err := truncateHostname(pod.Name, hostname)
	if err != nil {
		return "", "", err
	}
	domain := ""
	if pod.Spec.Subdomain != "" {
		if msgs := utilvalidation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) != 0 {
			return "", "", fmt.Errorf("pod Subdomain %q is not a valid DNS label: %s", pod.Spec.Subdomain, strings.Join(msgs, ";"))
		}
		cd := h.ClusterDomain
		if cd == "" {
			cd = "cluster.local"
		}
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, cd)
	}
	return hostname, domain, nil
}

// truncateHostname cuts a hostname to the 63 characters of a DNS label,
// without a trailing '-' or '.', as upstream's truncatePodHostnameIfNeeded.
func truncateHostname(podName, hostname string) (string, error) {
	if len(hostname) <= utilvalidation.DNS1123LabelMaxLength {
		return hostname, nil
	}
	hostname = strings.TrimRight(hostname[:utilvalidation.DNS1123LabelMaxLength], "-.")
	if hostname == "" {
		return "", fmt.Errorf("hostname for pod %q was invalid: %q", podName, hostname)
	}
	return hostname, nil
}
