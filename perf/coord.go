package perf

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// How values combine across processes (nccl-tests' -a, plus a sum).
type reduceKind int

const (
	reduceRank0 reduceKind = iota
	reduceMean
	reduceMin
	reduceMax
	reduceSum
)

func reduceHow(average int) reduceKind { return reduceKind(average) }

// coordinator is what nccl-tests does with MPI: barriers and reductions of
// host values across the processes of the job, outside the timed regions.
type coordinator interface {
	barrier() error
	reduce(v float64, how reduceKind) (float64, error)
	gatherDevices(local []DeviceInfo) ([]DeviceInfo, error)
	// gather collects every process's vector (all of the same length),
	// in process order where the coordinator knows it.
	gather(local []float64) ([][]float64, error)
	close()
}

// localCoordinator serves a single process.
type localCoordinator struct{}

func (localCoordinator) barrier() error                                  { return nil }
func (localCoordinator) reduce(v float64, _ reduceKind) (float64, error) { return v, nil }
func (localCoordinator) gatherDevices(l []DeviceInfo) ([]DeviceInfo, error) {
	return l, nil
}
func (localCoordinator) close() {}
func (localCoordinator) gather(l []float64) ([][]float64, error) {
	return [][]float64{l}, nil
}

// hostCoordinator coordinates processes through a host channel (the
// job's rendezvous store): no NCCL call, no GPU work.
type hostCoordinator struct {
	ctx    context.Context
	host   HostChannel
	nprocs int
}

func (c *hostCoordinator) barrier() error { return c.host.Barrier(c.ctx) }

func (c *hostCoordinator) reduce(v float64, how reduceKind) (float64, error) {
	all, err := c.host.AllGather(c.ctx, binary.LittleEndian.AppendUint64(nil, math.Float64bits(v)))
	if err != nil {
		return 0, err
	}
	vals := make([]float64, len(all))
	for i, b := range all {
		if len(b) != 8 {
			return 0, fmt.Errorf("process %d sent %d bytes for a value", i, len(b))
		}
		vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return combine(vals, how), nil
}

// combine is what nccl-tests' Allreduce makes of the processes' values.
func combine(vals []float64, how reduceKind) float64 {
	if len(vals) == 0 {
		return 0
	}
	acc := vals[0]
	if how == reduceRank0 {
		return acc
	}
	for _, v := range vals[1:] {
		switch how {
		case reduceMin:
			acc = min(acc, v)
		case reduceMax:
			acc = max(acc, v)
		default:
			acc += v
		}
	}
	if how == reduceMean {
		acc /= float64(len(vals))
	}
	return acc
}

func (c *hostCoordinator) gatherDevices(local []DeviceInfo) ([]DeviceInfo, error) {
	js, err := json.Marshal(local)
	if err != nil {
		return nil, err
	}
	all, err := c.host.AllGather(c.ctx, js)
	if err != nil {
		return nil, err
	}
	var out []DeviceInfo
	for p, b := range all {
		var d []DeviceInfo
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("device descriptions of process %d: %w", p, err)
		}
		out = append(out, d...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out, nil
}

func (c *hostCoordinator) gather(local []float64) ([][]float64, error) {
	all, err := c.host.AllGather(c.ctx, encodeFloats(local))
	if err != nil {
		return nil, err
	}
	out := make([][]float64, len(all))
	for p, b := range all {
		if out[p], err = decodeFloats(b); err != nil {
			return nil, fmt.Errorf("process %d: %w", p, err)
		}
	}
	return out, nil
}

func (c *hostCoordinator) close() {}

// ncclCoordinator reduces host values through the job's own communicators,
// on streams of its own, one small operation at a time.
type ncclCoordinator struct {
	b       *bench
	nprocs  int
	streams []cuda.Stream
	vals    []cuda.Slice[float64]
	slot    []cuda.Slice[uint8]
	all     []cuda.Slice[uint8]
}

// deviceSlot is the bytes of one rank's device description.
const deviceSlot = 1024

func newNCCLCoordinator(b *bench) (*ncclCoordinator, error) {
	c := &ncclCoordinator{b: b, nprocs: b.world.NProcs}
	for _, r := range b.ranks {
		s, err := r.dev.NewStream()
		if err != nil {
			c.close()
			return nil, &RunError{"coordination stream", err}
		}
		c.streams = append(c.streams, s)
		v, err := cuda.Alloc[float64](r.dev, 1)
		if err != nil {
			c.close()
			return nil, &RunError{"coordination buffer", err}
		}
		c.vals = append(c.vals, v)
	}
	return c, nil
}

func (c *ncclCoordinator) close() {
	for _, s := range c.streams {
		s.Destroy()
	}
	for _, v := range c.vals {
		v.Free()
	}
	for _, v := range c.slot {
		v.Free()
	}
	for _, v := range c.all {
		v.Free()
	}
}

func (c *ncclCoordinator) sync() error {
	var errs []error
	for _, s := range c.streams {
		errs = append(errs, s.Synchronize())
	}
	return errors.Join(errs...)
}

func (c *ncclCoordinator) barrier() error {
	_, err := c.reduce(0, reduceSum)
	return err
}

// reduce combines v over processes: every local rank takes part, the
// first local rank carrying the process's value for sums.
func (c *ncclCoordinator) reduce(v float64, how reduceKind) (float64, error) {
	for i := range c.b.ranks {
		x := v
		if i > 0 && (how == reduceSum || how == reduceMean) {
			x = 0
		}
		if err := c.vals[i].CopyFromHost([]float64{x}); err != nil {
			return 0, err
		}
	}
	err := nccl.Group(func() error {
		for i, r := range c.b.ranks {
			buf := nccl.BufferOf(c.vals[i])
			var err error
			switch how {
			case reduceRank0:
				err = r.comm.Broadcast(buf, buf, 0, c.streams[i])
			case reduceMin:
				err = r.comm.AllReduce(buf, buf, nccl.Min, c.streams[i])
			case reduceMax:
				err = r.comm.AllReduce(buf, buf, nccl.Max, c.streams[i])
			default:
				err = r.comm.AllReduce(buf, buf, nccl.Sum, c.streams[i])
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := c.sync(); err != nil {
		return 0, err
	}
	out := []float64{0}
	if err := c.vals[0].CopyToHost(out); err != nil {
		return 0, err
	}
	if how == reduceMean {
		out[0] /= float64(c.nprocs)
	}
	return out[0], nil
}

// gather reduces the vectors element by element to their maximum (one
// small all-reduce per element): without a host channel the processes'
// own vectors are not kept apart.
func (c *ncclCoordinator) gather(local []float64) ([][]float64, error) {
	out := make([]float64, len(local))
	for i, v := range local {
		m, err := c.reduce(v, reduceMax)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return [][]float64{out}, nil
}

// gatherDevices all-gathers every rank's description (JSON in a fixed
// slot per rank).
func (c *ncclCoordinator) gatherDevices(local []DeviceInfo) ([]DeviceInfo, error) {
	n := c.b.nranks
	for i, r := range c.b.ranks {
		js, _ := json.Marshal(local[i])
		if len(js) > deviceSlot {
			return nil, fmt.Errorf("device description of %d bytes", len(js))
		}
		slot := make([]byte, deviceSlot)
		copy(slot, js)
		s, err := cuda.AllocFrom(r.dev, slot)
		if err != nil {
			return nil, err
		}
		c.slot = append(c.slot, s)
		a, err := cuda.Alloc[uint8](r.dev, deviceSlot*n)
		if err != nil {
			return nil, err
		}
		c.all = append(c.all, a)
	}
	err := nccl.Group(func() error {
		for i, r := range c.b.ranks {
			if err := r.comm.AllGather(nccl.BufferOf(c.slot[i]), nccl.BufferOf(c.all[i]), c.streams[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := c.sync(); err != nil {
		return nil, err
	}
	raw, err := c.all[0].ToHost()
	if err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, n)
	for r := 0; r < n; r++ {
		js := bytes.TrimRight(raw[r*deviceSlot:(r+1)*deviceSlot], "\x00")
		if err := json.Unmarshal(js, &out[r]); err != nil {
			return nil, fmt.Errorf("device description of rank %d: %w", r, err)
		}
	}
	return out, nil
}
