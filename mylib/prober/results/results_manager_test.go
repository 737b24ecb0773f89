package results

import (
	"testing"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "mykubelet/mylib/container"
)

// TestSetSendsAnUpdateOnlyOnAChange: Get returns the cached result, a
// changed result goes out on Updates once, the same result again does
// not, and Remove forgets the container.
func TestSetSendsAnUpdateOnlyOnAChange(t *testing.T) {
	m := NewManager()
	id := kubecontainer.ContainerID{Type: "fake", ID: "c1"}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}}
	_, ok := m.Get(id)
	assert.False(t, ok)

	m.Set(id, Failure, pod)
	r, ok := m.Get(id)
	assert.True(t, ok)
	assert.Equal(t, Failure, r)
	assert.Equal(t, Update{ContainerID: id, Result: Failure, PodUID: "uid-1"}, <-m.Updates())

	m.Set(id, Failure, pod)
	select {
	case u := <-m.Updates():
		t.Fatalf("no change, yet an update: %+v", u)
	default:
	}
	m.Set(id, Success, pod)
	assert.Equal(t, Success, (<-m.Updates()).Result)

	m.Remove(id)
	_, ok = m.Get(id)
	assert.False(t, ok)
	m.Set(id, Success, pod)
	assert.Equal(t, Success, (<-m.Updates()).Result, "after Remove, the first result is a change again")
	assert.Equal(t, UpdatesCapacity, cap(m.(*manager).updates), "upstream's buffer of 20")
}

func TestResultStrings(t *testing.T) {
	assert.Equal(t, "Success", Success.String())
	assert.Equal(t, "Failure", Failure.String())
	assert.Equal(t, "UNKNOWN", Unknown.String())
}
