package gputest

import (
	"errors"
	"testing"

	"github.com/nccl4go/nccl"
)

// recorder is a testing.TB that records Fatalf and Skipf instead of
// stopping the goroutine.
type recorder struct {
	testing.TB
	fatal, skip bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.fatal = true }
func (r *recorder) Skipf(string, ...any)  { r.skip = true }

func TestSkipUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		fatal, skip bool
	}{
		{"nil", nil, false, false},
		{"other error", errors.New("boom"), false, false},
		{"too old", &nccl.UnsupportedError{Feature: "ncclCommShrink", Since: 22703, Loaded: 22602}, false, true},
		{"new enough", &nccl.UnsupportedError{Feature: "ncclCommShrink", Since: 22703, Loaded: 22803}, true, false},
	} {
		r := &recorder{TB: t}
		SkipUnsupported(r, tc.err)
		if r.fatal != tc.fatal || r.skip != tc.skip {
			t.Errorf("%s: fatal %v skip %v, want %v %v", tc.name, r.fatal, r.skip, tc.fatal, tc.skip)
		}
	}
}
