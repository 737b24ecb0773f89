package allocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"mykubelet/mylib/statedir"
)

// PodResourceInfo is what is recorded of one pod: its containers'
// resources by container name, and its pod-level resources if it has any.
type PodResourceInfo struct {
	ContainerResources map[string]v1.ResourceRequirements
	PodLevelResources  *v1.ResourceRequirements `json:",omitempty"`
}

// PodResourceInfoMap is what is recorded of every pod, by UID.
type PodResourceInfoMap map[types.UID]PodResourceInfo

// checkpoint is the file: the data as a JSON string, and its checksum, so
// that a file damaged on disk is refused rather than trusted.
type checkpoint struct {
	Data     string `json:"data"`
	Checksum uint32 `json:"checksum"`
}

// checkpointData is what Data holds.
type checkpointData struct {
	Entries PodResourceInfoMap `json:"entries,omitempty"`
}

func checksum(data string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(data)) // a hash's Write never fails
	return h.Sum32()
}

// state is one checkpointed PodResourceInfoMap: the map in memory, written
// to path at every change (but a removal, which waits for the next write).
type state struct {
	path string

	mu           sync.RWMutex
	pods         PodResourceInfoMap
	lastChecksum uint32 // of what the file holds: an unchanged map is not rewritten
}

// newState reads path's checkpoint back; none there is an empty state.
func newState(path string) (*state, error) {
	s := &state{path: path, pods: PodResourceInfoMap{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s is corrupt: %w", path, err)
	}
	if got := checksum(cp.Data); got != cp.Checksum {
		return nil, fmt.Errorf("checkpoint %s is corrupt: checksum %d, its data's is %d", path, cp.Checksum, got)
	}
	var data checkpointData
	if err := json.Unmarshal([]byte(cp.Data), &data); err != nil {
		return nil, fmt.Errorf("checkpoint %s is corrupt: %w", path, err)
	}
	if data.Entries != nil {
		s.pods = data.Entries
	}
	s.lastChecksum = cp.Checksum
	return s, nil
}

// store writes the map to the file, unless the file holds it already.
// Caller holds mu.
func (s *state) store() error {
	data, err := json.Marshal(checkpointData{Entries: s.pods}) // map keys are sorted: same map, same bytes
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.path, err)
	}
	cp := checkpoint{Data: string(data), Checksum: checksum(string(data))}
	if cp.Checksum == s.lastChecksum {
		return nil
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.path, err)
	}
	if err := statedir.WriteFile(s.path, b); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	s.lastChecksum = cp.Checksum
	return nil
}

// pod returns a copy of what is recorded of uid.
func (s *state) pod(uid types.UID) (PodResourceInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	info, ok := s.pods[uid]
	if !ok {
		return PodResourceInfo{}, false
	}
	return info.deepCopy(), true
}

func (s *state) container(uid types.UID, name string) (v1.ResourceRequirements, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.pods[uid].ContainerResources[name]
	return *r.DeepCopy(), ok
}

// setPod records info as all of uid's, and writes the file.
func (s *state) setPod(uid types.UID, info PodResourceInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.pods[uid]
	s.pods[uid] = info.deepCopy()
	if err := s.store(); err != nil {
		s.restore(uid, old, had) // memory and file stay alike
		return fmt.Errorf("pod %s: %w", uid, err)
	}
	return nil
}

// setContainer records r as container name's of uid, and writes the file.
func (s *state) setContainer(uid types.UID, name string, r v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.pods[uid]
	info := old.deepCopy()
	if info.ContainerResources == nil {
		info.ContainerResources = map[string]v1.ResourceRequirements{}
	}
	info.ContainerResources[name] = *r.DeepCopy()
	s.pods[uid] = info
	if err := s.store(); err != nil {
		s.restore(uid, old, had)
		return fmt.Errorf("pod %s container %s: %w", uid, name, err)
	}
	return nil
}

// setPodLevel records r as uid's pod-level resources, and writes the file.
func (s *state) setPodLevel(uid types.UID, r *v1.ResourceRequirements) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.pods[uid]
	info := old.deepCopy()
	info.PodLevelResources = r.DeepCopy()
	s.pods[uid] = info
	if err := s.store(); err != nil {
		s.restore(uid, old, had)
		return fmt.Errorf("pod %s pod-level resources: %w", uid, err)
	}
	return nil
}

// restore puts uid's record back as it was before a failed write. Caller
// holds mu.
func (s *state) restore(uid types.UID, old PodResourceInfo, had bool) {
	if had {
		s.pods[uid] = old
	} else {
		delete(s.pods, uid)
	}
}

// removeOrphans forgets every pod but those in keep. The file is not
// written: a stale entry is harmless, and the next write drops it (as
// upstream's RemoveOrphanedPods).
func (s *state) removeOrphans(keep sets.Set[types.UID]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid := range s.pods {
		if !keep.Has(uid) {
			delete(s.pods, uid)
		}
	}
}

func (s *state) remove(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
}

func (info PodResourceInfo) deepCopy() PodResourceInfo {
	out := PodResourceInfo{PodLevelResources: info.PodLevelResources.DeepCopy()}
	if info.ContainerResources != nil {
		out.ContainerResources = make(map[string]v1.ResourceRequirements, len(info.ContainerResources))
		for name, r := range info.ContainerResources {
			out.ContainerResources[name] = *r.DeepCopy()
		}
	}
	return out
}
