package container

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestGetUnknownPodReturnsEmptyStatus(t *testing.T) {
	c := NewCache()
	s, err := c.Get("uid-1")
	require.NoError(t, err)
	assert.Equal(t, &PodStatus{ID: "uid-1"}, s)
}

func TestSetKeepsTheNewerStatus(t *testing.T) {
	c := NewCache()
	newer := &PodStatus{ID: "uid-1", Name: "newer"}
	older := &PodStatus{ID: "uid-1", Name: "older"}
	assert.True(t, c.Set("uid-1", newer, nil, t0.Add(time.Second)))
	assert.False(t, c.Set("uid-1", older, nil, t0), "an older read must not win")
	s, _ := c.Get("uid-1")
	assert.Equal(t, "newer", s.Name)

	readErr := errors.New("runtime down")
	assert.True(t, c.Set("uid-1", nil, readErr, t0.Add(2*time.Second)))
	_, err := c.Get("uid-1")
	assert.ErrorIs(t, err, readErr)
}

func TestDeleteForgetsThePod(t *testing.T) {
	c := NewCache()
	c.Set("uid-1", &PodStatus{ID: "uid-1", Name: "p"}, nil, t0)
	c.Delete("uid-1")
	s, _ := c.Get("uid-1")
	assert.Equal(t, &PodStatus{ID: "uid-1"}, s)
}

// getNewerThan runs GetNewerThan in a goroutine and returns a channel with
// its answer.
func getNewerThan(c Cache, uid types.UID, minTime time.Time) <-chan *PodStatus {
	ch := make(chan *PodStatus, 1)
	go func() {
		s, _ := c.GetNewerThan(uid, minTime)
		ch <- s
	}()
	return ch
}

// blocked asserts that nothing arrives on ch for a short while.
func blocked(t *testing.T, ch <-chan *PodStatus) {
	t.Helper()
	select {
	case s := <-ch:
		t.Fatalf("GetNewerThan returned %+v, want it to block", s)
	case <-time.After(50 * time.Millisecond):
	}
}

func woken(t *testing.T, ch <-chan *PodStatus) *PodStatus {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("GetNewerThan did not return")
		return nil
	}
}

func TestGetNewerThanReturnsAtOnceWhenFresh(t *testing.T) {
	c := NewCache()
	c.Set("uid-1", &PodStatus{ID: "uid-1", Name: "p"}, nil, t0.Add(time.Second))
	s := woken(t, getNewerThan(c, "uid-1", t0))
	assert.Equal(t, "p", s.Name)
}

func TestGetNewerThanBlocksUntilSet(t *testing.T) {
	c := NewCache()
	c.Set("uid-1", &PodStatus{ID: "uid-1", Name: "old"}, nil, t0)
	ch := getNewerThan(c, "uid-1", t0)
	blocked(t, ch) // the entry is exactly t0: not newer

	c.Set("uid-2", &PodStatus{ID: "uid-2"}, nil, t0.Add(time.Second))
	blocked(t, ch) // another pod's update does not count

	c.Set("uid-1", &PodStatus{ID: "uid-1", Name: "new"}, nil, t0.Add(time.Second))
	assert.Equal(t, "new", woken(t, ch).Name)
}

func TestGetNewerThanWakesOnGlobalTimestamp(t *testing.T) {
	c := NewCache()
	c.Set("uid-1", &PodStatus{ID: "uid-1", Name: "unchanged"}, nil, t0)
	known := getNewerThan(c, "uid-1", t0)
	unknown := getNewerThan(c, "uid-9", t0)
	blocked(t, known)
	blocked(t, unknown)

	c.UpdateTime(t0) // not newer than t0
	blocked(t, known)
	blocked(t, unknown)

	// A relist that saw no change still proves the entry is fresh.
	c.UpdateTime(t0.Add(time.Second))
	assert.Equal(t, "unchanged", woken(t, known).Name)
	assert.Equal(t, &PodStatus{ID: "uid-9"}, woken(t, unknown), "an unknown pod gets an empty status")
}

func TestGetNewerThanAfterUpdateTimeReturnsAtOnce(t *testing.T) {
	c := NewCache()
	c.UpdateTime(t0.Add(time.Second))
	assert.Equal(t, &PodStatus{ID: "uid-9"}, woken(t, getNewerThan(c, "uid-9", t0)))
}

func TestContainerIDRoundTrip(t *testing.T) {
	id := BuildContainerID("containerd", "abc123")
	assert.Equal(t, "containerd://abc123", id.String())
	got, err := ParseContainerID(id.String())
	require.NoError(t, err)
	assert.Equal(t, id, got)
	_, err = ParseContainerID("abc123")
	assert.EqualError(t, err, `invalid container ID "abc123": want type://id`)
	assert.True(t, ContainerID{}.IsEmpty())
}

// TestGetNewerThanContextGivesUpWhenCtxEnds: the wait ends with ctx's
// error, and the waiter is gone (a later Set wakes nobody).
func TestGetNewerThanContextGivesUpWhenCtxEnds(t *testing.T) {
	c := NewCache().(*cache)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.GetNewerThanContext(ctx, "p", now)
		done <- err
	}()
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.waiters["p"]) == 1
	}, 5*time.Second, time.Millisecond, "the call waits")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Empty(t, c.waiters, "the waiter is removed")
}
