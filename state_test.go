package nccl_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// callAll calls every exported method of c with zero arguments (a
// background context for a context.Context) and returns the errors, by
// method name.
func callAll(c *nccl.Communicator) map[string]error {
	errType := reflect.TypeFor[error]()
	ctxType := reflect.TypeFor[context.Context]()
	out := map[string]error{}
	v := reflect.ValueOf(c)
	for i := range v.NumMethod() {
		m, name := v.Method(i), v.Type().Method(i).Name
		mt := m.Type()
		if mt.NumOut() == 0 || mt.Out(mt.NumOut()-1) != errType {
			continue
		}
		args := make([]reflect.Value, mt.NumIn())
		for j := range args {
			if mt.In(j) == ctxType {
				args[j] = reflect.ValueOf(context.Background())
			} else {
				args[j] = reflect.Zero(mt.In(j))
			}
		}
		res := m.Call(args)
		if err, _ := res[len(res)-1].Interface().(error); err != nil {
			out[name] = err
		}
	}
	return out
}

// StateError.Op is always the exported method's name (a ...Context
// variant's plain name), for every method a null or destroyed communicator
// refuses.
func TestStateErrorOpIsMethodName(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		destroyed := rawComm(t)
		if err := destroyed.Destroy(); err != nil {
			t.Fatal(err)
		}
		for what, c := range map[string]*nccl.Communicator{"null": new(nccl.Communicator), "nil": nil, "destroyed": destroyed} {
			n := 0
			for name, err := range callAll(c) {
				var se *nccl.StateError
				if !errors.As(err, &se) {
					continue
				}
				n++
				if want := strings.TrimSuffix(name, "Context"); se.Op != want {
					t.Errorf("%s: %s: StateError.Op %q, want %q (%v)", what, name, se.Op, want, err)
				}
			}
			t.Logf("%s: %d methods returned a StateError", what, n)
			if n < 40 {
				t.Errorf("%s: %d methods returned a StateError, want at least 40", what, n)
			}
		}
	})
}
