package perf_test

import (
	"context"
	"fmt"
	"os"

	"github.com/nccl4go/nccl/perf"
)

// Bus bandwidth corrects the algorithm bandwidth by what each link must
// carry: an all-reduce of 1 GiB on 8 ranks in 5 ms.
func ExampleBandwidth() {
	const n = 1 << 28 // float32 elements
	alg, bus, _ := perf.Bandwidth("all_reduce", n, 4, 0.005, 8)
	f, _ := perf.BusFactor("all_reduce", 8)
	fmt.Printf("algbw %.1f GB/s, busbw %.1f GB/s (factor %.2f)\n", alg, bus, f)
	// Output: algbw 214.7 GB/s, busbw 375.8 GB/s (factor 1.75)
}

// Sizes take nccl-tests' suffixes.
func ExampleParseSize() {
	for _, s := range []string{"8", "1K", "32M", "1.5K"} {
		n, _ := perf.ParseSize(s)
		fmt.Println(s, n)
	}
	// Output:
	// 8 8
	// 1K 1024
	// 32M 33554432
	// 1.5K 1536
}

// The engine as a library: all_reduce from 8 B to 1 GiB over GPUs 0 and 1
// of this process, printed as nccl-tests prints it. (Needs GPUs: no
// Output.)
func ExampleRun() {
	ctx := context.Background()
	w, err := perf.LocalWorld(ctx, []int{0, 1}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	o := perf.DefaultOptions("all_reduce")
	o.MinBytes, o.MaxBytes, o.StepFactor = 8, 1<<30, 2
	rep, err := perf.Run(ctx, o, w, &perf.TableWriter{W: os.Stdout})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("average bus bandwidth %.1f GB/s, %d wrong cells\n", rep.AvgBusBW, rep.Errors)
}
