package perf

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// oneRankComms are n independent one-rank communicators of the fake.
func oneRankComms(t *testing.T, n int) []*nccl.Communicator {
	t.Helper()
	var out []*nccl.Communicator
	for range n {
		w, err := LocalWorld(context.Background(), []int{0}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		out = append(out, w.Comms...)
	}
	return out
}

// -t 2: two threads each drive their communicators, meet at every barrier
// and reduction, and the first reports (nThread 2, every thread's device
// line); a share that does not divide, and a thread that fails, end the
// run with an error instead of a hang.
func TestThreads(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		w := &World{Comms: oneRankComms(t, 4), NProcs: 1}
		for _, test := range []string{"all_reduce", "alltoall"} {
			o := DefaultOptions(test)
			o.MinBytes, o.MaxBytes, o.StepFactor, o.Iters, o.Threads = 1024, 64<<10, 8, 3, 2
			o.PerIterTiming = true
			var out bytes.Buffer
			rep, err := Run(context.Background(), o, w, &TableWriter{W: &out})
			if err != nil {
				t.Fatalf("%s: %v\n%s", test, err, out.String())
			}
			if rep.Errors != 0 || len(rep.Rows) != 3 || len(rep.Devices) != 4 || !strings.Contains(out.String(), "# nThread 2 nGpus 2 ") {
				t.Errorf("%s: %d errors, %d rows, %d devices\n%s", test, rep.Errors, len(rep.Rows), len(rep.Devices), out.String())
			}
		}
		o := DefaultOptions("all_reduce")
		o.Threads = 3
		var oe *OptionError
		if _, err := Run(context.Background(), o, w, nil); !errors.As(err, &oe) || oe.Option != "-t" {
			t.Errorf("4 communicators in 3 threads: %v", err)
		}
		// A destroyed communicator fails its thread at once; the other
		// must not wait for it forever.
		comms := oneRankComms(t, 2)
		comms[1].Destroy()
		o.Threads = 2
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := Run(ctx, o, &World{Comms: comms, NProcs: 1}, nil)
		if err == nil || ctx.Err() != nil {
			t.Errorf("a failed thread: %v (context %v)", err, ctx.Err())
		}
	})
}
