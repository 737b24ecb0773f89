package fakeruntime

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mykubelet/mylib/fakeruntime/sandboxproc"
)

// heapPeak samples the Go heap (HeapAlloc) every millisecond until the
// returned stop is called, which returns how far above its start it rose.
func heapPeak() (stop func() uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak - base
	}
}

// TestBuffersAreChargedAsTheyGrow: what a script's output buffers hold
// counts toward its container's memory while they grow, so a 64Mi
// container that fills them is OOM-killed at its limit (exit 137,
// OOMKilled), and the heap never holds much more than the limit: a
// command substitution that collects 512 MB of printf, one printf of
// 512 × 1 MB (to /dev/null: the interpreter builds its whole output
// first), and a here-document of 40 × 16 MB. Before, the first took the
// runtime's process to gigabytes before the container was killed, and
// the other two were never killed.
func TestBuffersAreChargedAsTheyGrow(t *testing.T) {
	const limit = 64 << 20
	mb16 := strings.Repeat("%01000000d", 16)
	for name, script := range map[string]string{
		"command substitution": `while :; do x=$(i=0; while [ $i -lt 512 ]; do printf '%01000000d' 0; i=$((i+1)); done); done`,
		"printf to /dev/null":  `f=; i=0; while [ $i -lt 512 ]; do f="$f%01000000d"; i=$((i+1)); done; printf "$f" > /dev/null; echo survived`,
		"here-document":        "x=$(printf '" + mb16 + "'); cat > /dev/null <<EOF\n" + strings.Repeat("$x\n", 40) + "EOF\necho survived",
	} {
		t.Run(name, func(t *testing.T) {
			r := fixtureConfig(t, Config{})
			sb := runSandbox(t, r, "web", "uid-1", nil)
			c := createLimited(t, r, sb, "app", "busybox:1.36", limit, "sh", "-c", script)
			stop := heapPeak()
			startContainer(t, r, c)
			waitDone(t, r, c)
			grew := stop()
			st := containerStatus(t, r, c)
			assert.Equal(t, int32(ExitCodeSIGKILL), st.ExitCode)
			assert.Equal(t, ReasonOOMKilled, st.Reason)
			// GOGC=100 lets the heap reach twice what is live before the GC runs.
			assert.Less(t, grew, uint64(3*limit), "the heap grew %d MiB for a %d MiB limit", grew>>20, limit>>20)
			t.Logf("the heap grew %d MiB", grew>>20)
		})
	}
}

// TestChargedExpansionsChangeNothingElse: the checks rewriteExpansions
// adds to words print nothing and leave $? as the shell leaves it (an
// assignment's status is its last command substitution's), here-documents
// expand as before, eval and background jobs (which print the rewritten
// script and parse it again) get one check, not one more each time; and
// a printf whose format is applied one argument at a time to /dev/null
// runs however much it prints in all.
func TestChargedExpansionsChangeNothingElse(t *testing.T) {
	r := fixtureConfig(t, Config{})
	sb := runSandbox(t, r, "web", "uid-1", nil)
	c := createLimited(t, r, sb, "app", "busybox:1.36", 64<<20, "sh", "-c", "sleep 3600")
	startContainer(t, r, c)
	script := `a=1 b=2
false; x="$a$b"; echo "status $? x $x"
x=$(false)"$a$b"; echo "status $?"
cat <<EOF
$a-$b-${a}
EOF
cat <<'EOF'
$a$b
EOF
eval 'eval "y=\$a\$b"'; echo "eval $y"
( z="$a$b$a"; echo "job $z" ) & wait
i=0; f=; while [ $i -lt 200 ]; do f="$f "$i; i=$((i+1)); done
printf '%01000000d' $f > /dev/null; echo "printf $?"
printf '%s-%5d|%c%%\n' ab 42 xyz cd 7
`
	resp, err := r.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{"sh", "-c", script}, Timeout: 60})
	require.NoError(t, err)
	assert.Equal(t, "", string(resp.Stderr))
	assert.Equal(t, "status 0 x 12\nstatus 1\n1-2-1\n$a$b\neval 12\njob 121\nprintf 0\nab-   42|x%\ncd-    7|\x00%\n", string(resp.Stdout))
	assert.EqualValues(t, 0, resp.ExitCode)
	assert.Equal(t, runtimeapi.ContainerState_CONTAINER_RUNNING, containerStatus(t, r, c).State, "not OOM-killed")

	f, err := sandboxproc.ParseScript(`y="$a$b"; eval "$y"`)
	require.NoError(t, err)
	once := sandboxproc.PrintScript(f)
	f, err = sandboxproc.ParseScript(once)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(sandboxproc.PrintScript(f), sandboxproc.ExpandsCommand), "a rewritten word is rewritten no more: %s", sandboxproc.PrintScript(f))
}
