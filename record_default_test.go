package nccl_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/trace"
)

// The flight recorder is on by default: with NCCL4GO_TRACE_BUFFER unset, a
// communicator's calls are in trace.Default()'s dump, DefaultEntries per
// communicator, each with its enqueue time to the millisecond.
func TestFlightRecorderOnByDefault(t *testing.T) {
	if v, ok := os.LookupEnv(trace.BufferEnv); ok {
		t.Skipf("%s=%q is set in the environment: the default is not what runs", trace.BufferEnv, v)
	}
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		c := fakeComm(t, 1, 0, &nccl.Config{CommName: "world"})
		defer c.Destroy()
		buf := collBuf(t, 0, f32s(4)...)
		type span struct{ before, after time.Time }
		// The coarse clock lags by at most a tick, plus however late a
		// loaded machine runs its ticker: allow 10 ms, and retry the
		// timing (not the counts) a few times on a busy machine.
		var late []string
		for trial := 1; trial <= 5; trial++ {
			var spans []span
			for i := range 5 {
				if i > 0 {
					time.Sleep(3 * time.Millisecond)
				}
				b := time.Now()
				if err := c.AllReduce(buf, buf, nccl.Sum, cuda.Stream{}); err != nil {
					t.Fatal(err)
				}
				spans = append(spans, span{b, time.Now()})
			}
			d := trace.Default().Snapshot("test")
			if d.BufferSize != trace.DefaultEntries {
				t.Fatalf("rings of %d entries, want %d", d.BufferSize, trace.DefaultEntries)
			}
			var got []trace.DumpEntry
			for _, e := range d.Entries {
				if e.Op == trace.AllReduce {
					got = append(got, e)
				}
			}
			if len(got) != 5*trial {
				t.Fatalf("%d all-reduces recorded, want %d", len(got), 5*trial)
			}
			late = late[:0]
			for i, e := range got[len(got)-5:] {
				at := time.Unix(0, e.EnqueuedNs)
				if at.Before(spans[i].before.Add(-10*time.Millisecond)) || at.After(spans[i].after.Add(time.Millisecond)) {
					late = append(late, fmt.Sprintf("all-reduce %d enqueued at %v, called between %v and %v", i, at, spans[i].before, spans[i].after))
				}
			}
			if len(late) == 0 {
				return
			}
		}
		t.Errorf("enqueue times off in 5 trials; the last:\n%s", strings.Join(late, "\n"))
	})
}
