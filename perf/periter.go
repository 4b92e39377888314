package perf

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/nccl4go/nccl/cuda"
)

// IterStats are the per-iteration times of one timing column group (-I,
// nccl-tests' per-iteration report): CUDA events around every iteration,
// the maximum over this process's GPUs, then over processes. Times are in
// microseconds; the JSON names are nccl-tests' ("out_of_place_per_iter"
// and "in_place_per_iter" objects of its JSON version 3).
type IterStats struct {
	// Skipped is the number of leading iterations left out of the summary
	// (-K); Times still lists them.
	Skipped int     `json:"skipped_iterations"`
	Min     float64 `json:"min_us"`
	Max     float64 `json:"max_us"`
	Avg     float64 `json:"avg_us"`
	P50     float64 `json:"p50_us"`
	P95     float64 `json:"p95_us"`
	P99     float64 `json:"p99_us"`
	Stdev   float64 `json:"stdev_us"` // population standard deviation
	CV      float64 `json:"cv_pct"`   // Stdev/Avg in percent (0 when Avg is 0)
	// Times are every iteration's time, the maximum over processes.
	Times []float64 `json:"times_us"`
	// PerProcess are each process's own times (the maximum over its GPUs),
	// when the job has several processes and they coordinate on the host.
	PerProcess [][]float64 `json:"per_process_max_times_us,omitempty"`
}

// percentileIndex is nccl-tests' index of a percentile in n sorted values.
func percentileIndex(n, pct int) int { return min(n-1, (n*pct+99)/100-1) }

// iterStats summarizes times (microseconds) past the first skip, as
// nccl-tests' computeIterStats.
func iterStats(times []float64, skip int, perProc [][]float64) *IterStats {
	s := &IterStats{Skipped: skip, Times: times, PerProcess: perProc}
	sorted := slices.Clone(times[skip:])
	n := len(sorted)
	if n == 0 {
		return s
	}
	slices.Sort(sorted)
	s.Min, s.Max = sorted[0], sorted[n-1]
	s.P50 = sorted[n/2]
	s.P95 = sorted[percentileIndex(n, 95)]
	s.P99 = sorted[percentileIndex(n, 99)]
	var sum float64
	for _, v := range sorted {
		sum += v
	}
	s.Avg = sum / float64(n)
	var v float64
	for _, x := range sorted {
		v += (x - s.Avg) * (x - s.Avg)
	}
	s.Stdev = math.Sqrt(v / float64(n))
	if s.Avg > 0 {
		s.CV = s.Stdev / s.Avg * 100
	}
	return s
}

// iterEvents are the CUDA events of one timed loop with -I: per rank,
// iters+1 boundaries (one shared between neighbouring iterations), or a
// start and a stop per iteration with -z 3 (so that the barrier between
// them is not timed), as nccl-tests records them.
type iterEvents struct {
	ev     [][]*cuda.Event // [rank][event]
	paired bool
	iters  int
}

func (b *bench) newIterEvents(iters int) (*iterEvents, error) {
	e := &iterEvents{paired: b.opts.Blocking == 3, iters: iters}
	n := iters + 1
	if e.paired {
		n = 2 * iters
	}
	for _, r := range b.ranks {
		evs := make([]*cuda.Event, n)
		for i := range evs {
			ev, err := r.dev.NewEvent()
			if err != nil {
				e.destroy()
				return nil, &RunError{"per-iteration timing events", err}
			}
			evs[i] = ev
		}
		e.ev = append(e.ev, evs)
	}
	return e, nil
}

// record records the start of iteration iter (stop: its end, with -z 3;
// iter == iters: the end of the last).
func (b *bench) recordIter(e *iterEvents, iter int, stop bool) error {
	k := iter
	if e.paired {
		k = 2 * iter
		if stop {
			k++
		}
	}
	for i, r := range b.ranks {
		if err := e.ev[i][k].Record(r.stream); err != nil {
			return err
		}
	}
	return nil
}

// times are the iterations' times in seconds (per operation: divided by
// the aggregated iterations), the maximum over this process's ranks.
func (e *iterEvents) times(agg int) ([]float64, error) {
	out := make([]float64, e.iters)
	for _, evs := range e.ev {
		for j := range e.iters {
			a, z := evs[j], evs[j+1]
			if e.paired {
				a, z = evs[2*j], evs[2*j+1]
			}
			d, err := cuda.Elapsed(a, z)
			if err != nil {
				return nil, err
			}
			// cudaEventElapsedTime's float milliseconds, as nccl-tests reads them.
			sec := float64(float32(d.Seconds()*1e3)) / 1e3 / float64(agg)
			out[j] = max(out[j], sec)
		}
	}
	return out, nil
}

func (e *iterEvents) destroy() {
	for _, evs := range e.ev {
		for _, ev := range evs {
			if ev != nil {
				ev.Destroy()
			}
		}
	}
}

// perIter turns this process's iteration times (seconds) into the cell's
// statistics: every process's times, their maximum per iteration.
func (b *bench) perIter(local []float64) (*IterStats, error) {
	all, err := b.coord.gather(local)
	if err != nil {
		return nil, err
	}
	times := make([]float64, len(local))
	for _, p := range all {
		if len(p) != len(local) {
			return nil, fmt.Errorf("per-iteration times: a process sent %d, this one has %d", len(p), len(local))
		}
		for i, v := range p {
			times[i] = max(times[i], v*1e6)
		}
	}
	var perProc [][]float64
	if len(all) > 1 {
		for _, p := range all {
			us := make([]float64, len(p))
			for i, v := range p {
				us[i] = v * 1e6
			}
			perProc = append(perProc, us)
		}
	}
	return iterStats(times, b.opts.PerIterSkip, perProc), nil
}

// encodeFloats and decodeFloats carry float64s through a host channel.
func encodeFloats(v []float64) []byte {
	out := make([]byte, 0, 8*len(v))
	for _, x := range v {
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(x))
	}
	return out
}

func decodeFloats(b []byte) ([]float64, error) {
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%d bytes: not float64s", len(b))
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}
