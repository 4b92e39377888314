package watchdog_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/watchdog"
)

// When NCCL reports the communicator broken while several operations
// share one CUDA event (or none was recorded for them yet), the watchdog
// cannot tell which of them is in flight: it names the range, never only
// the oldest, which may have completed. Here the work after the second
// all-reduce hangs (#3 is in flight) while #2, completed, is still pending
// behind no event of its own: the old message named #2 alone (seen on the
// H200 as "AllReduce #9" for a peer killed during #11).
func TestAsyncErrorNamesTheRangeItCannotTellApart(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_WORK_HANG=2", "FAKE_NCCL_ASYNC_FAIL=ncclCommSuspend=6"}}, func(t *testing.T) {
		c := oneRank(t, &nccl.Config{CommName: "tp"})
		buf := floats(t, 16)
		s, err := cuda.Device(0).NewStream()
		if err != nil {
			t.Fatal(err)
		}
		w, err := watchdog.Watch(c, &watchdog.Options{Timeout: time.Minute, PollInterval: 100 * time.Millisecond, NoDump: true})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Stop()
		for range 3 {
			if err := c.AllReduce(buf, buf, nccl.Sum, s); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(250 * time.Millisecond) // a poll or two: #1's event completes
		if err := c.Suspend(nccl.SuspendMem); !errors.Is(err, nccl.ErrRemote) {
			t.Fatalf("Suspend: %v; the fake should fail it with ncclRemoteError", err)
		}
		err = waitDone(t, w, 5*time.Second)
		var ae *watchdog.AsyncError
		if !errors.As(err, &ae) || ae.Oldest == nil {
			t.Fatalf("Err = %v, want an *AsyncError naming an operation", err)
		}
		newest := ae.Oldest.Seq
		if ae.Shared > 0 {
			if ae.Newest == nil {
				t.Fatalf("Shared %d without Newest: %+v", ae.Shared, ae)
			}
			newest = ae.Newest.Seq
		}
		if ae.Oldest.Seq > 3 || newest < 3 {
			t.Errorf("the error names #%d to #%d, which does not hold AllReduce #3, the one in flight: %v", ae.Oldest.Seq, newest, err)
		}
		if !strings.Contains(err.Error(), "AllReduce #3") {
			t.Errorf("message %q does not name AllReduce #3", err)
		}
		c.Abort()
	})
}
