package docscheck_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"mykubelet/scripts/testkit/testcluster"
)

// TestLowDiskIsWarned checks what chapter 17's Troubleshooting says of
// scripts/tour.sh and scripts/test.sh: under 15 % free on the state
// directory's file system, where a kubelet reports DiskPressure, they
// warn; at 15 % and above they say nothing. df is faked with the sizes
// (in 1024-byte blocks) the case chooses.
func TestLowDiskIsWarned(t *testing.T) {
	for _, tc := range []struct {
		size, avail string
		warn        bool
	}{
		{"1000000", "149999", true}, // 14.99 %
		{"1000000", "150000", false},
		{"1000000", "900000", false},
	} {
		c := newLibCheckout(t)
		df := "#!/bin/sh\necho 'Filesystem 1024-blocks Used Available Capacity Mounted on'\necho \"/dev/x " + tc.size + " 1 " + tc.avail + " 90% /\"\n"
		require.NoError(t, os.WriteFile(filepath.Join(c.bin, "df"), []byte(df), 0o755))
		// .state does not exist yet: the warning names the checkout.
		cmd := exec.Command("bash", "-c", `set -euo pipefail; source "$1"; warn_low_disk "$STATE_DIR"`, "_", filepath.Join(c.repo, "scripts", "lib.sh"))
		cmd.Env = append(os.Environ(), "PATH="+c.bin+":"+os.Getenv("PATH"), "MYKUBELET_STATE_DIR=")
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		require.NoError(t, cmd.Run(), errOut.String())
		stderr := errOut.String()
		if tc.warn {
			assert.Contains(t, stderr, "warning: "+c.repo+" is on a file system with 14 % free: under 15 %, a kubelet reports DiskPressure")
		} else {
			assert.Empty(t, stderr, "%s of %s blocks free", tc.avail, tc.size)
		}
	}
	for _, script := range []string{"tour.sh", "test.sh"} {
		src, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(t), "scripts", script))
		require.NoError(t, err)
		assert.Contains(t, string(src), "\nwarn_low_disk \"$STATE_DIR\"\n", "scripts/%s warns at its start", script)
	}
}
