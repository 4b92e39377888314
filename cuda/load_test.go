package cuda_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/faketest"
)

// DriverVersion may run while Load retries after a failed load (-race
// checks that they share no unguarded state).
func TestDriverVersionDuringLoad(t *testing.T) {
	faketest.Run(t, faketest.Env{NoCUDA: true}, func(t *testing.T) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 200 {
				if err := cuda.Load("/nonexistent/libcuda.so.1"); !errors.Is(err, cuda.ErrLibraryNotFound) {
					t.Errorf("Load of a missing file: %v", err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				if _, err := cuda.DriverVersion(); !errors.Is(err, cuda.ErrLibraryNotFound) {
					t.Errorf("DriverVersion without a driver: %v", err)
					return
				}
			}
		}()
		wg.Wait()
	})
}
