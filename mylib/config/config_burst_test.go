package config

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"mykubelet/mylib/kubetypes"
)

// TestBurstOf500UpdatesWithSlowReaderDoesNotDeadlock sends 500 SETs (250 per
// source, each replacing the source's pod with a new one, so each merge
// sends a REMOVE and an ADD) while a slow reader asks SeenAllSources between
// receives, as the kubelet's sync loop does. The Updates channel (50) fills
// up, so merges wait to send; SeenAllSources must still answer. The context
// bounds the test: if it ends first, the pipeline is stuck.
func TestBurstOf500UpdatesWithSlowReaderDoesNotDeadlock(t *testing.T) {
	const perSource = 250
	sources := []string{kubetypes.FileSource, kubetypes.ApiserverSource}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newConfig()

	var senders sync.WaitGroup
	for _, source := range sources {
		ch := c.Channel(ctx, source)
		senders.Go(func() {
			for i := range perSource {
				p := apiPod(fmt.Sprintf("%s-%03d", source, i), fmt.Sprintf("%s-%03d", source, i))
				select {
				case ch <- kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{p}, Source: source}:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	defer senders.Wait()

	// Each source sends perSource ADDs and perSource-1 REMOVEs.
	want := len(sources) * (2*perSource - 1)
	added := map[string][]string{}
	removed := map[string][]string{}
	received := 0
	for received < want {
		select {
		case u := <-c.Updates():
			received++
			for _, p := range u.Pods {
				switch u.Op {
				case kubetypes.ADD:
					added[u.Source] = append(added[u.Source], p.Name)
				case kubetypes.REMOVE:
					removed[u.Source] = append(removed[u.Source], p.Name)
				default:
					t.Errorf("unexpected %s of %s from %s", u.Op, p.Name, u.Source)
				}
			}
		case <-ctx.Done():
			t.Fatalf("stuck: received %d of %d updates before the deadline (%v)", received, want, ctx.Err())
		}
		c.SeenAllSources()                 // what the sync loop asks between receives
		time.Sleep(100 * time.Microsecond) // a slow reader: the channel fills up
	}

	assert.True(t, c.SeenAllSources())
	for _, source := range sources {
		require.Len(t, added[source], perSource, source)
		require.Len(t, removed[source], perSource-1, source)
		for i := range perSource {
			name := fmt.Sprintf("%s-%03d", source, i)
			assert.Equal(t, name, added[source][i], "ADDs in the order sent")
			if i < perSource-1 {
				assert.Equal(t, name, removed[source][i], "REMOVEs in the order sent")
			}
		}
	}
}
