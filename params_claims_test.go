package nccl_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// ParamHandle.Text's doc: a string parameter without a value (NULL in
// NCCL: NCCL_NO_CACHE's default, the environment empty) reads as "".
func TestParamTextWithoutValue(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		t.Setenv("NCCL_NO_CACHE", "")
		p, err := nccl.BindParam("NCCL_NO_CACHE")
		if err != nil {
			t.Fatal(err)
		}
		if s, err := p.Text(); err != nil || s != "" {
			t.Errorf("Text of a string parameter without a value = %q, %v; want \"\"", s, err)
		}
	})
}

// Params' doc: the map is a snapshot, the caller's: a later change of
// NCCL's value does not show in it, and changing the map changes nothing
// of NCCL's.
func TestParamsSnapshot(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{fakeParams}}, func(t *testing.T) {
		m, err := nccl.Params()
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("NCCL_T_I32", "42")
		if m["NCCL_T_I32"] != "-70000" {
			t.Errorf("the snapshot's NCCL_T_I32 = %q after the environment changed; want the old -70000", m["NCCL_T_I32"])
		}
		m["NCCL_T_STR"] = "changed"
		if v, err := nccl.Param("NCCL_T_STR"); err != nil || v != "hello" {
			t.Errorf("Param(NCCL_T_STR) = %q, %v after the map changed; want hello", v, err)
		}
		again, err := nccl.Params()
		if err != nil || again["NCCL_T_I32"] != "42" || again["NCCL_T_STR"] != "hello" {
			t.Errorf("a second Params = %v, %v", again, err)
		}
	})
}

// ParamHandle's doc: a handle is a value, safe from several goroutines:
// handles shared by goroutines that read at once (NCCL answers strings in
// a buffer of the calling thread) each read their own parameter's value.
func TestParamHandleConcurrent(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{fakeParams}}, func(t *testing.T) {
		str, err := nccl.BindParam("NCCL_T_STR")
		if err != nil {
			t.Fatal(err)
		}
		i32, err := nccl.BindParam("NCCL_T_I32")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					if g%2 == 0 {
						if s, err := str.Text(); err != nil || s != "hello" {
							errs <- fmt.Errorf("Text = %q, %v", s, err)
							return
						}
						if b, err := str.Bytes(); err != nil || string(b) != "hello\x00" {
							errs <- fmt.Errorf("Bytes = %q, %v", b, err)
							return
						}
					} else if v, err := i32.Int32(); err != nil || v != -70000 {
						errs <- fmt.Errorf("Int32 = %d, %v", v, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
