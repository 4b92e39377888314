package nccl_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// Loading NCCL, against the fake libraries (internal/faketest).

func TestLoadFromEnvironment(t *testing.T) {
	faketest.Run(t, faketest.Env{}, func(t *testing.T) {
		path := os.Getenv(nccl.LibraryEnv)
		r, err := nccl.Version()
		if err != nil || r != faketest.DefaultRelease {
			t.Fatalf("Version = %s, %v", r, err)
		}
		if p, err := nccl.LibraryPath(); err != nil || p != path {
			t.Errorf("LibraryPath = %q, %v; want %q", p, err, path)
		}
		if err := nccl.Load(path); err != nil {
			t.Errorf("Load of the loaded file: %v", err)
		}
		other, _ := faketest.Libraries(t, faketest.Env{Release: 22803})
		if err := nccl.Load(other); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Load of another file: %v, want an error naming %s", err, path)
		}
		s, err := nccl.ErrorString(nccl.InvalidUsage)
		if err != nil || s != "invalid usage (run with NCCL_DEBUG=WARN for details)" {
			t.Errorf("ErrorString = %q, %v", s, err)
		}
		if s, _ := nccl.ErrorString(nccl.Timeout); s != "timeout" {
			t.Errorf("ErrorString(Timeout) on 2.30.7 = %q", s)
		}
		if s, err := nccl.LastError(); err != nil || s != "" {
			t.Errorf("LastError before any failure = %q, %v", s, err)
		}
		if n := faketest.Calls(t, "ncclGetVersion"); n != 1 {
			t.Errorf("ncclGetVersion called %d times, want once", n)
		}
	})
	// ncclTimeout is new in 2.30.3: older libraries do not know the code.
	faketest.Run(t, faketest.Env{Release: 22907}, func(t *testing.T) {
		if s, err := nccl.ErrorString(nccl.Timeout); err != nil || s != "unknown result code" {
			t.Errorf("ErrorString(Timeout) on 2.29.7 = %q, %v", s, err)
		}
	})
}

func TestLoadExplicit(t *testing.T) {
	good, _ := faketest.Libraries(t, faketest.Env{Release: 22902})
	faketest.Run(t, faketest.Env{NoNCCL: true}, func(t *testing.T) {
		if err := nccl.Load(good); err != nil {
			t.Fatalf("Load(%s): %v", good, err)
		}
		if r, err := nccl.Version(); err != nil || r != 22902 {
			t.Errorf("Version = %s, %v", r, err)
		}
		if p, _ := nccl.LibraryPath(); p != good {
			t.Errorf("LibraryPath = %q", p)
		}
	})
	// A failed default load does not stop an explicit Load.
	faketest.Run(t, faketest.Env{NoNCCL: true}, func(t *testing.T) {
		if _, err := nccl.Version(); !errors.Is(err, nccl.ErrLibraryNotFound) {
			t.Fatalf("Version: %v", err)
		}
		if err := nccl.Load(good); err != nil {
			t.Fatalf("Load after a failed default load: %v", err)
		}
		if r, err := nccl.Version(); err != nil || r != 22902 {
			t.Errorf("Version = %s, %v", r, err)
		}
	})
}

func TestLoadMissing(t *testing.T) {
	faketest.Run(t, faketest.Env{NoNCCL: true}, func(t *testing.T) {
		path := os.Getenv(nccl.LibraryEnv)
		_, err := nccl.Version()
		if !errors.Is(err, nccl.ErrLibraryNotFound) {
			t.Fatalf("Version: %v, want ErrLibraryNotFound", err)
		}
		var le *nccl.LoadError
		if !errors.As(err, &le) || len(le.Tried) != 1 || !strings.HasPrefix(le.Tried[0], path+" (") {
			t.Errorf("LoadError.Tried = %v, want just %s with its reason", le, path)
		}
		msg := err.Error()
		for _, want := range []string{path, nccl.LibraryEnv, "nccl.Load"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error does not mention %q: %s", want, msg)
			}
		}
		// Every entry point reports the same failure; nothing else is tried.
		if strings.Contains(msg, " "+nccl.DefaultLibrary+" (") {
			t.Errorf("the loader fell back to %s although %s is set: %s", nccl.DefaultLibrary, nccl.LibraryEnv, msg)
		}
		if _, err := nccl.LibraryPath(); !errors.Is(err, nccl.ErrLibraryNotFound) {
			t.Errorf("LibraryPath: %v", err)
		}
		if _, err := nccl.Init(1, 0, nccl.UniqueID{1}, nil); !errors.Is(err, nccl.ErrLibraryNotFound) {
			t.Errorf("Init: %v", err)
		}
		if err := nccl.Load("/nonexistent/libnccl.so.2"); !errors.Is(err, nccl.ErrLibraryNotFound) ||
			!strings.Contains(err.Error(), "/nonexistent/libnccl.so.2") {
			t.Errorf("Load of a missing file: %v", err)
		}
	})
}

func TestLoadNotNCCL(t *testing.T) {
	faketest.Run(t, faketest.Env{NotNCCL: true}, func(t *testing.T) {
		_, err := nccl.Version()
		if !errors.Is(err, nccl.ErrLibraryNotFound) || !strings.Contains(err.Error(), "ncclGetVersion") {
			t.Fatalf("Version with a library that is not NCCL: %v", err)
		}
	})
}

func TestLoadTooOld(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version int
		loaded  nccl.Release
	}{
		{"2.18.5", 21805, 21805},
		{"old encoding 2.8.5", 2805, 20805},
	} {
		t.Run(tc.name, func(t *testing.T) {
			faketest.Run(t, faketest.Env{Version: tc.version}, func(t *testing.T) {
				_, err := nccl.Version()
				var ue *nccl.UnsupportedError
				if !errors.Is(err, nccl.ErrUnsupported) || !errors.As(err, &ue) {
					t.Fatalf("Version: %v, want an UnsupportedError", err)
				}
				if ue.Since != nccl.MinRelease || ue.Loaded != tc.loaded {
					t.Errorf("%+v, want Since %s Loaded %s", *ue, nccl.MinRelease, tc.loaded)
				}
				if !strings.Contains(err.Error(), nccl.MinRelease.String()) || !strings.Contains(err.Error(), tc.loaded.String()) {
					t.Errorf("the error names neither release: %v", err)
				}
				if _, err := nccl.NewUniqueID(); err == nil {
					t.Error("NewUniqueID works with a library that was refused")
				}
			})
		})
	}
	// The oldest release the binding takes loads.
	faketest.Run(t, faketest.Env{Release: int(nccl.MinRelease)}, func(t *testing.T) {
		if r, err := nccl.Version(); err != nil || r != nccl.MinRelease {
			t.Errorf("Version = %s, %v", r, err)
		}
	})
}

// A function the loaded library lacks: an UnsupportedError naming the C
// function, its first release and the loaded release.
func TestMissingFunction(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22303}, func(t *testing.T) {
		id, err := nccl.NewUniqueID()
		if err != nil {
			t.Fatal(err)
		}
		_, err = nccl.InitScalable(1, 0, []nccl.UniqueID{id}, nil)
		var ue *nccl.UnsupportedError
		if !errors.As(err, &ue) || !errors.Is(err, nccl.ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("InitScalable on 2.23.3: %v, want an UnsupportedError", err)
		}
		want := nccl.UnsupportedError{Feature: "ncclCommInitRankScalable", Since: 22304, Loaded: 22303}
		if *ue != want {
			t.Errorf("%+v, want %+v", *ue, want)
		}
		if err.Error() != "nccl: ncclCommInitRankScalable: requires NCCL 2.23.4, loaded 2.23.3" {
			t.Errorf("message %q", err.Error())
		}
		// What the library has still works.
		c, err := nccl.Init(1, 0, id, nil)
		if err != nil {
			t.Fatalf("Init on 2.23.3: %v", err)
		}
		if err := c.Destroy(); err != nil {
			t.Fatal(err)
		}
	})
	faketest.Run(t, faketest.Env{Release: 22304}, func(t *testing.T) {
		id, _ := nccl.NewUniqueID()
		c, err := nccl.InitScalable(1, 0, []nccl.UniqueID{id}, nil)
		if err != nil {
			t.Fatalf("InitScalable on 2.23.4: %v", err)
		}
		if n := faketest.Calls(t, "ncclCommInitRankScalable"); n != 1 {
			t.Errorf("ncclCommInitRankScalable called %d times", n)
		}
		c.Destroy()
	})
}
