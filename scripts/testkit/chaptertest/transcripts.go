package chaptertest

import (
	"os"
	"testing"

	"mykubelet/scripts/readmewalk"
	"mykubelet/scripts/testkit/testcluster"
)

// Transcripts are a README's console blocks that the walk runs: each
// "$ command" and the lines it prints, once for each time the README runs
// it, and the commands of its background blocks (those that start a
// kubelet), in order.
type Transcripts struct {
	Commands map[string][][]string
	Starts   []string
}

// ReadTranscripts parses the README at path as the walk does; it fails the
// test if the README cannot be read or parsed.
func ReadTranscripts(t testing.TB, path string) Transcripts {
	t.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := readmewalk.Parse(string(md))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tr := Transcripts{Commands: map[string][][]string{}}
	for _, st := range steps {
		switch {
		case st.Action == readmewalk.Run && readmewalk.IsConsole(st.Block):
			for _, cc := range readmewalk.Console(st.Block) {
				tr.Commands[cc.Command] = append(tr.Commands[cc.Command], cc.Output)
			}
		case st.Action == readmewalk.Background:
			tr.Starts = append(tr.Starts, readmewalk.Commands(st.Block)[0])
		}
	}
	return tr
}

// FreePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	return testcluster.FreePorts(t, 1)[0]
}
