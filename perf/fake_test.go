package perf_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
	"github.com/nccl4go/nccl/perf"
)

func TestFakeSmoke(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		w, err := perf.LocalWorld(context.Background(), []int{0}, perf.CommConfig("all_reduce"))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for _, test := range perf.Tests() {
			o := perf.DefaultOptions(test)
			o.MinBytes, o.MaxBytes, o.StepFactor = 8, 1<<20, 4
			o.Iters = 2
			o.Type, o.Op = "all", "all"
			var buf bytes.Buffer
			rep, err := perf.Run(context.Background(), o, w, &perf.TableWriter{W: &buf})
			if err != nil {
				t.Fatalf("%s: %v\n%s", test, err, buf.String())
			}
			if rep.Errors != 0 || !strings.Contains(buf.String(), "Out of bounds values : 0 OK") {
				t.Errorf("%s: %d errors\n%s", test, rep.Errors, buf.String())
			}
			if test == "all_reduce" || test == "alltoall" {
				t.Logf("%s", buf.String())
			}
		}
	})
}
