package watchdog

import (
	"errors"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// A run that hangs: its first operation is named and the others of the
// run are counted in Shared. The poller is driven by hand (a poll interval
// of a minute keeps the process's poller away), so no tick falls between
// the six calls and splits the run: #1 gets its event and completes, #2-#6
// (#2 is the work after the first, which FAKE_CUDA_WORK_HANG hangs) form
// one run that one later event follows.
func TestRunHangNamesRange(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"FAKE_CUDA_WORK_HANG=1"}}, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		c, err := nccl.Init(1, 0, id, &nccl.Config{CommName: "hung"})
		if err != nil {
			t.Fatal(err)
		}
		mem, err := cuda.AllocFrom(0, make([]float32, 8))
		if err != nil {
			t.Fatal(err)
		}
		buf := nccl.BufferOf(mem)
		const timeout = 100 * time.Millisecond
		w, err := Watch(c, &Options{Timeout: timeout, PollInterval: time.Minute, NoDump: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		settle(t, w) // the tick that registration brings, before the six calls (under -race it fell among them)
		for i := range 6 {
			if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
				t.Fatalf("AllReduce %d: %v", i, err)
			}
		}
		if st := w.Stats(); st.Pending != 6 {
			t.Errorf("stats %+v before any tick; want 6 operations pending", st)
		}
		deadline := time.Now().Add(5 * time.Second)
		for w.Err() == nil && time.Now().Before(deadline) {
			w.tick()
			select {
			case <-w.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
		var te *TimeoutError
		if err := w.Err(); !errors.As(err, &te) {
			t.Fatalf("Err = %v, want a *TimeoutError", err)
		}
		if te.Op.Seq != 2 || te.Shared != 4 {
			t.Errorf("timed out on #%d with %d shared; want #2 and the 4 after it (#3-#6)", te.Op.Seq, te.Shared)
		}
	})
}
