package nccl_test

import (
	"runtime"
	"testing"

	"github.com/nccl4go/nccl/internal/gputest"
)

// BenchmarkCachedProperty reads cached communicator properties: after the
// first query, a read makes no cgo call and no heap allocation. It reports
// cgo-calls/op beside allocs/op.
func BenchmarkCachedProperty(b *testing.B) {
	gputest.Require(b)
	c := initOne(b)
	defer c.Destroy()
	reads := map[string]func() error{
		"NRanks":  func() error { _, err := c.NRanks(); return err },
		"Device":  func() error { _, err := c.Device(); return err },
		"GINType": func() error { _, err := c.GINType(); return err }, // the cached error on NCCL < 2.29.2
	}
	for name, read := range reads {
		b.Run(name, func(b *testing.B) {
			read() // fill the cache
			b.ReportAllocs()
			calls := runtime.NumCgoCall()
			for b.Loop() {
				read()
			}
			b.ReportMetric(float64(runtime.NumCgoCall()-calls)/float64(b.N), "cgo-calls/op")
		})
	}
}
