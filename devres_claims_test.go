package nccl_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// DevResource's and TeamResource's docs: safe for concurrent use, and a
// resource serves one device communicator. Goroutines read the handles
// (Handle, MultimemHandle, PutKernelArg, String) while two others pass the
// same resources to CreateDevComm at once: exactly one of those succeeds,
// and every read is either a typed refusal (not made yet, or closed) or
// the handle NCCL wrote. Run under -race.
func TestDevResourcesConcurrent(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23007, Extra: []string{"FAKE_NCCL_MULTIMEM=1", "FAKE_NCCL_POLLS=2"}}, func(t *testing.T) {
		c, world := fakeWorld(t, 2, 0)
		bar, err := nccl.LSABarrierResource(world, 3)
		if err != nil {
			t.Fatal(err)
		}
		mm, err := nccl.NewTeamResource(world, true)
		if err != nil {
			t.Fatal(err)
		}
		req := &nccl.DevCommRequirements{Resources: []*nccl.DevResource{bar}, Teams: []*nccl.TeamResource{mm}}
		var stop atomic.Bool
		var readers sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 4 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				var arg [8]byte
				for !stop.Load() {
					var err error
					if g%2 == 0 {
						var n int
						if _, n, err = bar.Handle(); err == nil && n != 3 {
							errs <- errors.New("bar.Handle: a count other than 3")
							return
						}
						_, _ = bar.PutKernelArg(arg[:])
						_ = bar.String()
					} else {
						_, err = mm.MultimemHandle()
						_, _ = mm.PutKernelArg(arg[:])
						_ = mm.String()
					}
					if err != nil && !errors.Is(err, nccl.ErrInvalidUsage) && !errors.Is(err, nccl.ErrClosed) {
						errs <- err
						return
					}
				}
			}()
		}
		var made sync.WaitGroup
		comms := make(chan *nccl.DevComm, 2)
		refused := make(chan error, 2)
		for range 2 {
			made.Add(1)
			go func() {
				defer made.Done()
				d, err := c.CreateDevComm(req)
				if err != nil {
					refused <- err
					return
				}
				comms <- d
			}()
		}
		made.Wait()
		close(comms)
		close(refused)
		var ds []*nccl.DevComm
		for d := range comms {
			ds = append(ds, d)
		}
		if len(ds) != 1 {
			t.Errorf("%d of 2 CreateDevComm calls with the same resources succeeded, want 1", len(ds))
		}
		for err := range refused {
			var ae *nccl.ArgError
			if !errors.As(err, &ae) {
				t.Errorf("the second CreateDevComm: %v, want an ArgError naming the resource used twice", err)
			}
		}
		if len(ds) == 1 {
			if _, n, err := bar.Handle(); err != nil || n != 3 {
				t.Errorf("bar.Handle after CreateDevComm: count %d, %v", n, err)
			}
			if h, err := mm.MultimemHandle(); err != nil || h == 0 {
				t.Errorf("mm.MultimemHandle after CreateDevComm: %#x, %v", h, err)
			}
		}
		for _, d := range ds {
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		}
		stop.Store(true)
		readers.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
