package watchdog_test

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/watchdog"
)

// TestNilWatchdog: the *Watchdog a failed Watch returns is nil, and
// `defer w.Stop()` right after Watch is the usual Go shape: its methods do
// what they do on the zero Watchdog, never panic.
func TestNilWatchdog(t *testing.T) {
	var w *watchdog.Watchdog
	w.Stop()
	select {
	case <-w.Done():
	default:
		t.Error("Done of a nil Watchdog is not closed")
	}
	if w.Err() != nil || w.Stats() != (watchdog.Stats{}) || w.Comm() != (watchdog.Comm{}) {
		t.Errorf("Err %v, Stats %+v, Comm %+v", w.Err(), w.Stats(), w.Comm())
	}
	if err := w.Synchronize(t.Context(), cuda.Stream{}); !errors.Is(err, nccl.ErrInvalidUsage) {
		t.Errorf("Synchronize on a nil Watchdog = %v, want ErrInvalidUsage", err)
	}
}

// TestWatchBadOptions: bad options and a nil communicator are typed
// errors (nccl.ErrInvalidArgument), a communicator watched twice
// nccl.ErrInvalidUsage; an ExitCode the process cannot exit with (256
// would read as success) is refused; concurrent Stops all return.
func TestWatchBadOptions(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		if _, err := watchdog.Watch(nil, nil); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("Watch(nil) = %v, want ErrInvalidArgument", err)
		}
		c := oneRank(t, nil)
		defer c.Destroy()
		for name, o := range map[string]watchdog.Options{
			"negative Timeout":      {Timeout: -time.Second},
			"negative PollInterval": {PollInterval: -time.Second},
			"unknown Action":        {Action: watchdog.Action(7)},
			"ExitCode 256":          {ExitCode: 256},
			"ExitCode -1":           {ExitCode: -1},
		} {
			if w, err := watchdog.Watch(c, &o); !errors.Is(err, nccl.ErrInvalidArgument) {
				t.Errorf("%s: Watch = %v, want ErrInvalidArgument", name, err)
				w.Stop()
			}
		}
		w, err := watchdog.Watch(c, &watchdog.Options{NoDump: true, ExitCode: 255})
		if err != nil {
			t.Fatal(err)
		}
		if w2, err := watchdog.Watch(c, nil); !errors.Is(err, nccl.ErrInvalidUsage) {
			t.Errorf("a second Watch = %v, want ErrInvalidUsage", err)
			w2.Stop()
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() { defer wg.Done(); w.Stop() }()
		}
		wg.Wait()
		select {
		case <-w.Done():
		default:
			t.Error("Done not closed after Stop")
		}
	})
}

// TestHeartbeatHonoursNoDump: Options.NoDump turns the dump off, the
// heartbeat monitor's included (it dumped to os.TempDir anyway).
func TestHeartbeatHonoursNoDump(t *testing.T) {
	if os.Getenv(envExitChild) != "" {
		hangInChild(t, watchdog.Options{Timeout: time.Minute, PollInterval: 2 * time.Millisecond, NoDump: true,
			ExitCode: 44, Heartbeat: 200 * time.Millisecond})
		return
	}
	code, out := runExitChild(t, "TestHeartbeatHonoursNoDump", "FAKE_CUDA_QUERY_HANG=1")
	if code != 44 || !strings.Contains(out, "watchdog: heartbeat monitor:") {
		t.Fatalf("child exit status %d, output:\n%s", code, out)
	}
	if strings.Contains(out, "flight recorder dumped") {
		t.Errorf("NoDump, yet the heartbeat monitor dumped:\n%s", out)
	}
}
