package cuda_test

import (
	"slices"
	"testing"

	"github.com/nccl4go/nccl/cuda"
	"github.com/nccl4go/nccl/internal/cudabridge"
	"github.com/nccl4go/nccl/internal/faketest"
)

// checkMappedChunks: memory mapped from two separate physical chunks side
// by side (cuMemMap; PyTorch's expandable segments, NCCL's cuMem
// allocations) is one usable range: CheckRange and Verify accept a range
// across the seam, copies across it work, and a range running past the
// mapping is still refused.
func checkMappedChunks(t *testing.T) {
	dev := cuda.Device(0)
	base, size, free, err := cuda.MapChunks(dev, 2)
	if err != nil {
		t.Fatalf("MapChunks: %v", err)
	}
	defer func() {
		if err := free(); err != nil {
			t.Errorf("unmapping: %v", err)
		}
	}()
	if _, err := cudabridge.CheckRange(base, size, int(dev)); err != nil {
		t.Errorf("CheckRange over both chunks (%d bytes at %#x): %v", size, base, err)
	}
	if _, err := cudabridge.CheckRange(base+uintptr(size/4), size/2, int(dev)); err != nil {
		t.Errorf("CheckRange across the seam: %v", err)
	}
	if _, err := cudabridge.CheckRange(base, size+1, int(dev)); err == nil {
		t.Errorf("CheckRange one byte past the mapping: accepted")
	}
	n := int(size / 4)
	s := cuda.Wrap[float32](base, n, dev)
	if err := allocationMemory(s.Allocation()).Verify(); err != nil {
		t.Fatalf("Verify of both chunks: %v", err)
	}
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i)
	}
	if err := s.CopyFromHost(src); err != nil {
		t.Fatalf("CopyFromHost across the seam: %v", err)
	}
	got := make([]float32, n)
	if err := s.CopyToHost(got); err != nil {
		t.Fatalf("CopyToHost: %v", err)
	}
	if !slices.Equal(got, src) {
		t.Errorf("copy across the seam lost data")
	}
}

func TestCheckRangeMappedChunks(t *testing.T) {
	faketest.Run(t, faketest.Env{}, checkMappedChunks)
}

func TestGPUCheckRangeMappedChunks(t *testing.T) {
	requireGPU(t)
	checkMappedChunks(t)
}
