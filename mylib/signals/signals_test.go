package signals

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFirstSignalCancelsSecondExits runs SetupSignalContext in a child process
// and sends it two SIGINTs, as a learner pressing Ctrl-C twice would.
func TestFirstSignalCancelsSecondExits(t *testing.T) {
	if os.Getenv("SIGNALS_TEST_CHILD") == "1" {
		ctx := SetupSignalContext()
		fmt.Println("ready")
		<-ctx.Done()
		fmt.Println("cancelled")
		time.Sleep(time.Minute) // a slow shutdown: only the second signal ends it
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFirstSignalCancelsSecondExits$")
	cmd.Env = append(os.Environ(), "SIGNALS_TEST_CHILD=1")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)

	require.True(t, lines.Scan())
	require.Equal(t, "ready", lines.Text())
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.True(t, lines.Scan())
	require.Equal(t, "cancelled", lines.Text())
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))

	err = cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the second signal must end the process, got %v", err)
	require.Equal(t, 1, exit.ExitCode())
}
