package perf

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// runThreads is -t: [Options.Threads] goroutines, each on an OS thread of
// its own, each driving len(world.Comms)/Threads communicators in order
// (nccl-tests' thread t drives GPUs t*nGpus..), meeting at nccl-tests'
// thread barriers and reductions, then with the other processes. The
// first thread reports; its report is returned, with every thread's
// errors counted.
func runThreads(ctx context.Context, opts Options, world *World, rep Reporter) (*Report, error) {
	n := opts.Threads
	if len(world.Comms)%n != 0 {
		return nil, &OptionError{"-t", fmt.Sprint(n), fmt.Sprintf("%d communicators do not split into %d threads", len(world.Comms), n)}
	}
	var parent coordinator = localCoordinator{}
	if world.NProcs > 1 {
		if world.Host == nil {
			return nil, &OptionError{"-t", fmt.Sprint(n), "threads across processes need the World's host channel (JobWorld sets it)"}
		}
		parent = &hostCoordinator{ctx: ctx, host: world.Host, nprocs: world.NProcs}
	}
	defer parent.close()
	g := newThreadGroup(n, parent)
	per := len(world.Comms) / n
	reports := make([]*Report, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for t := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rep
			if t != 0 {
				r = Reporters()
			}
			reports[t], errs[t] = run(ctx, opts, world, world.Comms[t*per:(t+1)*per], &threadMember{g, t}, r)
			if errs[t] != nil {
				g.fail(errs[t]) // the others stop waiting for this one
			}
		}()
	}
	wg.Wait()
	return reports[0], errors.Join(errs...)
}

// errThreadFailed: another thread of the process failed.
var errThreadFailed = errors.New("perf: another thread failed")

// threadGroup is the meeting point of a process's threads (nccl-tests'
// Barrier and Allreduce over threads): each coordination is a round that
// every thread enters with its value; the last to arrive combines the
// values, takes the process-level step (the parent coordinator) for all,
// and wakes the others with the result.
type threadGroup struct {
	n      int
	parent coordinator

	mu      sync.Mutex
	cond    sync.Cond
	arrived int
	gen     uint64
	vals    []any
	result  any
	resErr  error
	failed  bool
}

func newThreadGroup(n int, parent coordinator) *threadGroup {
	g := &threadGroup{n: n, parent: parent, vals: make([]any, n)}
	g.cond.L = &g.mu
	return g
}

// round deposits thread's v and returns what last made of all of them.
func (g *threadGroup) round(thread int, v any, last func(vals []any) (any, error)) (any, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed {
		return nil, errThreadFailed
	}
	gen := g.gen
	g.vals[thread] = v
	if g.arrived++; g.arrived == g.n {
		g.result, g.resErr = last(g.vals)
		g.arrived = 0
		g.gen++
		g.cond.Broadcast()
		return g.result, g.resErr
	}
	for g.gen == gen && !g.failed {
		g.cond.Wait()
	}
	if g.gen == gen {
		return nil, errThreadFailed
	}
	// The next round cannot end before this thread joins it: the result
	// is still this round's.
	return g.result, g.resErr
}

// fail releases every waiting thread, for good.
func (g *threadGroup) fail(error) {
	g.mu.Lock()
	g.failed = true
	g.cond.Broadcast()
	g.mu.Unlock()
}

// threadMember is one thread's coordinator.
type threadMember struct {
	g *threadGroup
	t int
}

func (m *threadMember) barrier() error {
	_, err := m.g.round(m.t, nil, func([]any) (any, error) { return nil, m.g.parent.barrier() })
	return err
}

func (m *threadMember) reduce(v float64, how reduceKind) (float64, error) {
	r, err := m.g.round(m.t, v, func(vals []any) (any, error) {
		f := make([]float64, len(vals))
		for i, x := range vals {
			f[i] = x.(float64)
		}
		return m.g.parent.reduce(combine(f, how), how)
	})
	if err != nil {
		return 0, err
	}
	return r.(float64), nil
}

func (m *threadMember) gatherDevices(local []DeviceInfo) ([]DeviceInfo, error) {
	r, err := m.g.round(m.t, local, func(vals []any) (any, error) {
		var all []DeviceInfo
		for _, x := range vals {
			all = append(all, x.([]DeviceInfo)...)
		}
		return m.g.parent.gatherDevices(all)
	})
	if err != nil {
		return nil, err
	}
	return slices.Clone(r.([]DeviceInfo)), nil
}

// gather: the threads' vectors combine to their maximum per element (the
// slowest GPU of the process), then go to the processes.
func (m *threadMember) gather(local []float64) ([][]float64, error) {
	r, err := m.g.round(m.t, local, func(vals []any) (any, error) {
		most := slices.Clone(vals[0].([]float64))
		for _, x := range vals[1:] {
			for i, v := range x.([]float64) {
				most[i] = max(most[i], v)
			}
		}
		return m.g.parent.gather(most)
	})
	if err != nil {
		return nil, err
	}
	return r.([][]float64), nil
}

func (m *threadMember) close() {}
