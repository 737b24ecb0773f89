package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"mykubelet/mylib/cadvisor"
	"mykubelet/mylib/images"
)

// eventLog is a fake recorder: the events recorded, as "Type Reason".
type eventLog []string

func (l *eventLog) record(eventType, event string) { *l = append(*l, eventType+" "+event) }

func (l *eventLog) take() []string { out := *l; *l = nil; return out }

func TestConditionEventsOnTheFirstStatusAndOnTransitionsOnly(t *testing.T) {
	fc := testingclock.NewFakeClock(t0)
	var log eventLog
	memory, runtimeErr := false, error(nil)
	setters := []Setter{
		MemoryPressureCondition(fc.Now, func() bool { return memory }, log.record),
		DiskPressureCondition(fc.Now, NoPressure, log.record),
		PIDPressureCondition(fc.Now, NoPressure, log.record),
		ReadyCondition(fc.Now, func() error { return runtimeErr }, nil, log.record),
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}

	apply(t, node, setters)
	assert.Equal(t, []string{"Normal NodeHasSufficientMemory", "Normal NodeHasNoDiskPressure", "Normal NodeHasSufficientPID"}, log.take(),
		"a new pressure condition records its event; a new Ready condition records none, as upstream")

	fc.Step(10e9)
	apply(t, node, setters)
	assert.Empty(t, log.take(), "nothing changed: no event")

	memory, runtimeErr = true, errors.New("container runtime is down")
	apply(t, node, setters)
	assert.Equal(t, []string{"Normal NodeHasInsufficientMemory", "Normal NodeNotReady"}, log.take())
	apply(t, node, setters)
	assert.Empty(t, log.take(), "still under pressure and not ready: no second event")

	memory, runtimeErr = false, nil
	apply(t, node, setters)
	assert.Equal(t, []string{"Normal NodeHasSufficientMemory", "Normal NodeReady"}, log.take())
}

func TestReadyEventWhenAnUnknownNodeTurnsReady(t *testing.T) {
	// After a restart the node lifecycle controller may have set Ready
	// Unknown: turning True is a transition, and records NodeReady.
	var log eventLog
	node := &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionUnknown}}}}
	apply(t, node, []Setter{ReadyCondition(testingclock.NewFakeClock(t0).Now, nil, nil, log.record)})
	assert.Equal(t, []string{"Normal NodeReady"}, log.take())
}

func TestConditionSettersWithoutARecorder(t *testing.T) {
	node := &v1.Node{}
	apply(t, node, conditionSetters(testingclock.NewFakeClock(t0).Now, func() bool { return true }))
	apply(t, node, []Setter{MemoryPressureCondition(testingclock.NewFakeClock(t0).Now, NoPressure, nil)})
	_, c := GetNodeCondition(&node.Status, v1.NodeMemoryPressure)
	assert.Equal(t, v1.ConditionFalse, c.Status, "a nil recorder is allowed")
}

func imageList(n int) []images.Image {
	var list []images.Image
	for i := range n {
		list = append(list, images.Image{ID: fmt.Sprintf("sha256:%064d", i), RepoTags: []string{fmt.Sprintf("example.com/img%d:latest", i)}, Size: int64(1000 - i)})
	}
	return list
}

func TestImagesCappedAtNodeStatusMaxImages(t *testing.T) {
	list := imageList(60)
	listFunc := func(context.Context) ([]images.Image, error) { return list, nil }
	for _, tc := range []struct {
		max  int32
		want int
	}{{DefaultNodeStatusMaxImages, 50}, {-1, 60}, {3, 3}, {0, 0}, {100, 60}} {
		node := &v1.Node{}
		require.NoError(t, Images(tc.max, listFunc)(context.Background(), node))
		assert.Len(t, node.Status.Images, tc.want, "nodeStatusMaxImages %d", tc.max)
		if tc.want > 0 {
			assert.Equal(t, []string{"example.com/img0:latest"}, node.Status.Images[0].Names, "the list's order is kept: largest first")
			assert.Equal(t, int64(1000), node.Status.Images[0].SizeBytes)
		}
	}
	assert.Equal(t, 50, DefaultNodeStatusMaxImages)
}

func TestImagesNamesAreDigestsThenTagsAtMostFive(t *testing.T) {
	img := images.Image{Size: 42,
		RepoDigests: []string{"docker.io/library/nginx@sha256:aa", "docker.io/library/nginx@sha256:bb"},
		RepoTags:    []string{"docker.io/library/nginx:1.27", "docker.io/library/nginx:latest", "nginx:a", "nginx:b"}}
	node := &v1.Node{}
	require.NoError(t, Images(-1, func(context.Context) ([]images.Image, error) { return []images.Image{img}, nil })(context.Background(), node))
	require.Len(t, node.Status.Images, 1)
	assert.Equal(t, []string{"docker.io/library/nginx@sha256:aa", "docker.io/library/nginx@sha256:bb",
		"docker.io/library/nginx:1.27", "docker.io/library/nginx:latest", "nginx:a"}, node.Status.Images[0].Names)
	assert.Len(t, img.RepoDigests, 2, "the image's own slices are not changed")
	assert.Len(t, img.RepoTags, 4)
}

func TestImagesErrorEmptiesTheList(t *testing.T) {
	node := &v1.Node{Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"old"}}}}}
	err := Images(50, func(context.Context) ([]images.Image, error) { return nil, errors.New("runtime down") })(context.Background(), node)
	require.ErrorContains(t, err, "runtime down")
	assert.Empty(t, node.Status.Images)
}

var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestMachineInfoReportsTheNodeIDsAndRecordsAReboot(t *testing.T) {
	boot := "b00710d0-0000-4000-8000-000000000000"
	machine := func() (*cadvisor.MachineInfo, error) {
		return &cadvisor.MachineInfo{NumCores: 1, MemoryCapacity: 1 << 30, BootID: boot, MachineID: "0123456789abcdef0123456789abcdef"}, nil
	}
	var events []string
	record := func(eventType, event, message string) { events = append(events, eventType+" "+event+" "+message) }
	set := MachineInfo(DefaultMaxPods, machine, nil, nil, record)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	require.NoError(t, set(context.Background(), node))
	assert.Regexp(t, uuidForm, node.Status.NodeInfo.SystemUUID, "unreadable product_uuid: derived from the name")
	assert.Equal(t, boot, node.Status.NodeInfo.BootID)
	assert.Empty(t, events, "the first boot ID is no reboot")

	require.NoError(t, set(context.Background(), node))
	assert.Empty(t, events)

	boot = "b00710d0-0000-4000-8000-000000000001"
	require.NoError(t, set(context.Background(), node))
	assert.Equal(t, []string{"Warning Rebooted Node n1 has been rebooted, boot id: " + boot}, events)
	assert.Equal(t, boot, node.Status.NodeInfo.BootID)
}
