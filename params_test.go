package nccl_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/internal/faketest"
)

// NCCL's parameter API (ncclParam*, NCCL 2.30.3) against the fake NCCL,
// whose registry holds 2.30.7's parameters (src/debug.cc,
// src/param/param.cc) plus FAKE_NCCL_PARAMS.

// fakeParams registers one parameter of each typed getter's type.
var fakeParams = "FAKE_NCCL_PARAMS=NCCL_T_I8:i8=-5,NCCL_T_I16:i16=-300,NCCL_T_I32:i32=-70000,NCCL_T_I64:i64=-5000000000," +
	"NCCL_T_U8:u8=250,NCCL_T_U16:u16=65000,NCCL_T_U32:u32=4000000000,NCCL_T_U64:u64=18000000000000000000," +
	"NCCL_T_STR:str=hello,NCCL_T_BOOL:bool=1,NCCL_T_HIDDEN:i32:private=7"

func TestParamsRead(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{fakeParams, "NCCL_DEBUG=WARN", "NCCL_DEBUG_FILE=/tmp/x.%h"}}, func(t *testing.T) {
		v, err := nccl.Param("NCCL_DEBUG")
		if err != nil || v != "WARN" {
			t.Errorf(`Param("NCCL_DEBUG") = %q, %v; want "WARN" (the environment)`, v, err)
		}
		if v, err := nccl.Param("NCCL_T_I32"); err != nil || v != "-70000" {
			t.Errorf("Param(NCCL_T_I32) = %q, %v", v, err)
		}
		keys, err := nccl.ParamKeys()
		if err != nil {
			t.Fatalf("ParamKeys: %v", err)
		}
		if !slices.IsSorted(keys) {
			t.Errorf("ParamKeys not sorted: %v", keys)
		}
		for _, k := range []string{"NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_T_U64"} {
			if !slices.Contains(keys, k) {
				t.Errorf("ParamKeys lacks %s: %v", k, keys)
			}
		}
		for _, k := range []string{"NCCL_T_HIDDEN", "NCCL_PARAM_DUMP_ALL", "NCCL_NO_CACHE"} {
			if slices.Contains(keys, k) {
				t.Errorf("ParamKeys lists the private %s without NCCL_PARAM_DUMP_ALL", k)
			}
		}
		m, err := nccl.Params()
		if err != nil {
			t.Fatalf("Params: %v", err)
		}
		if len(m) != len(keys) || m["NCCL_DEBUG_FILE"] != "/tmp/x.%h" || m["NCCL_T_STR"] != "hello" {
			t.Errorf("Params = %v", m)
		}
		// A private parameter is still readable by key.
		if v, err := nccl.Param("NCCL_T_HIDDEN"); err != nil || v != "7" {
			t.Errorf("Param(NCCL_T_HIDDEN) = %q, %v", v, err)
		}
	})
}

// The values are live: NCCL reads its parameter, not a copy taken at load.
func TestParamsLive(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{fakeParams}}, func(t *testing.T) {
		p, err := nccl.BindParam("NCCL_T_I32")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := p.Int32(); err != nil || v != -70000 {
			t.Fatalf("Int32 = %d, %v; want the default -70000", v, err)
		}
		t.Setenv("NCCL_T_I32", "42")
		if v, err := p.Int32(); err != nil || v != 42 {
			t.Errorf("Int32 after setting the environment = %d, %v; want 42", v, err)
		}
		if v, err := nccl.Param("NCCL_T_I32"); err != nil || v != "42" {
			t.Errorf("Param = %q, %v; want 42", v, err)
		}
	})
}

func TestParamsTyped(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{fakeParams}}, func(t *testing.T) {
		bind := func(key string) nccl.ParamHandle {
			t.Helper()
			p, err := nccl.BindParam(key)
			if err != nil {
				t.Fatalf("BindParam(%s): %v", key, err)
			}
			if p.Key() != key {
				t.Errorf("Key() = %q, want %q", p.Key(), key)
			}
			return p
		}
		check := func(what string, got, want any, err error) {
			t.Helper()
			if err != nil || got != want {
				t.Errorf("%s = %v, %v; want %v", what, got, err, want)
			}
		}
		i8, err := bind("NCCL_T_I8").Int8()
		check("Int8", i8, int8(-5), err)
		i16, err := bind("NCCL_T_I16").Int16()
		check("Int16", i16, int16(-300), err)
		i32, err := bind("NCCL_T_I32").Int32()
		check("Int32", i32, int32(-70000), err)
		i64, err := bind("NCCL_T_I64").Int64()
		check("Int64", i64, int64(-5000000000), err)
		u8, err := bind("NCCL_T_U8").Uint8()
		check("Uint8", u8, uint8(250), err)
		u16, err := bind("NCCL_T_U16").Uint16()
		check("Uint16", u16, uint16(65000), err)
		u32, err := bind("NCCL_T_U32").Uint32()
		check("Uint32", u32, uint32(4000000000), err)
		u64, err := bind("NCCL_T_U64").Uint64()
		check("Uint64", u64, uint64(18000000000000000000), err)
		s, err := bind("NCCL_T_STR").Text()
		check("Text", s, "hello", err)
		b, err := bind("NCCL_T_BOOL").Bytes()
		if err != nil || len(b) != 1 || b[0] != 1 {
			t.Errorf("Bytes of a bool = %v, %v; want [1]", b, err)
		}
		b, err = bind("NCCL_T_STR").Bytes()
		if err != nil || string(b) != "hello\x00" {
			t.Errorf("Bytes of a string = %q, %v; want the string and its NUL", b, err)
		}
		// A value longer than the first buffer: Bytes grows it.
		long := strings.Repeat("x", 300)
		t.Setenv("NCCL_T_STR", long)
		b, err = bind("NCCL_T_STR").Bytes()
		if err != nil || string(b) != long+"\x00" {
			t.Errorf("Bytes of a 300-byte string: %d bytes, %v", len(b), err)
		}
		// NCCL_DEBUG is an enum: four bytes, no typed getter.
		t.Setenv("NCCL_DEBUG", "INFO")
		b, err = bind("NCCL_DEBUG").Bytes()
		if err != nil || len(b) != 4 || b[0] != 3 {
			t.Errorf("Bytes of NCCL_DEBUG=INFO = %v, %v; want level 3 in 4 bytes", b, err)
		}
		// The getter must match the registered type.
		_, err = bind("NCCL_T_I32").Int64()
		var ne *nccl.Error
		if !errors.Is(err, nccl.ErrInvalidArgument) || !errors.As(err, &ne) || !strings.Contains(ne.Detail, "not of type int64_t") {
			t.Errorf("Int64 of an int32 parameter: %v, want an invalid-argument error naming the type", err)
		}
		if _, err := bind("NCCL_T_I32").Text(); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("Text of an int32 parameter: %v", err)
		}
	})
}

func TestParamsBadInput(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{fakeParams}}, func(t *testing.T) {
		_, err := nccl.Param("NCCL_ALGO") // a legacy variable: not in the registry
		var ne *nccl.Error
		if !errors.Is(err, nccl.ErrInvalidArgument) || !errors.As(err, &ne) || !strings.Contains(ne.Detail, "NCCL_ALGO is not in NCCL's parameter registry") {
			t.Errorf("Param(NCCL_ALGO): %v", err)
		}
		if _, err := nccl.BindParam("NCCL_NOPE"); !errors.Is(err, nccl.ErrInvalidArgument) {
			t.Errorf("BindParam(unknown): %v", err)
		}
		wantArgErr(t, func() error { _, err := nccl.Param(""); return err }(), "Param", "key", "empty")
		wantArgErr(t, func() error { _, err := nccl.BindParam("A\x00B"); return err }(), "BindParam", "key", "NUL")
		var zero nccl.ParamHandle
		wantArgErr(t, func() error { _, err := zero.Int32(); return err }(), "ParamHandle.Int32", "handle", "BindParam")
		wantArgErr(t, func() error { _, err := zero.Bytes(); return err }(), "ParamHandle.Bytes", "handle")
		wantArgErr(t, func() error { _, err := zero.Text(); return err }(), "ParamHandle.Text", "handle")
		noNCCLCall(t, "ncclParamGetI32")
	})
}

// NCCL_PARAM_DUMP_ALL=1 lists the private parameters too.
func TestParamsDumpAll(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{fakeParams, "NCCL_PARAM_DUMP_ALL=1"}}, func(t *testing.T) {
		keys, err := nccl.ParamKeys()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"NCCL_T_HIDDEN", "NCCL_PARAM_DUMP_ALL", "NCCL_NO_CACHE", "NCCL_DEBUG"} {
			if !slices.Contains(keys, k) {
				t.Errorf("ParamKeys with NCCL_PARAM_DUMP_ALL=1 lacks %s", k)
			}
		}
	})
}

// DumpParams: NCCL prints to the process's standard output.
func TestDumpParams(t *testing.T) {
	out := t.TempDir() + "/dump"
	faketest.Run(t, faketest.Env{Extra: []string{fakeParams, "NCCL_DEBUG=WARN"}}, func(t *testing.T) {
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// Point file descriptor 1 (C's stdout) at the file for the call.
		saved, err := dupFD(1)
		if err != nil {
			t.Skipf("cannot redirect standard output: %v", err)
		}
		if err := dup2FD(int(f.Fd()), 1); err != nil {
			t.Skipf("cannot redirect standard output: %v", err)
		}
		derr := nccl.DumpParams()
		dup2FD(saved, 1)
		if derr != nil {
			t.Fatalf("DumpParams: %v", derr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.HasPrefix(s, "=== ncclParam Registry Dump ===") || !strings.Contains(s, "NCCL_DEBUG") ||
			!strings.Contains(s, "Current value=WARN") || strings.Contains(s, "NCCL_T_HIDDEN") {
			t.Errorf("dump:\n%s", s)
		}
	})
}

// Before NCCL 2.30.3 the parameter API is missing: every call says so.
func TestParamsUnsupported(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 23000}, func(t *testing.T) {
		_, err := nccl.Param("NCCL_DEBUG")
		wantUnsupported(t, "Param", err, "ncclParamGetParameter", 23003)
		_, err = nccl.ParamKeys()
		wantUnsupported(t, "ParamKeys", err, "ncclParamGetAllParameterKeys", 23003)
		_, err = nccl.Params()
		wantUnsupported(t, "Params", err, "ncclParamGetAllParameterKeys", 23003)
		wantUnsupported(t, "DumpParams", nccl.DumpParams(), "ncclParamDumpAll", 23003)
		_, err = nccl.BindParam("NCCL_DEBUG")
		wantUnsupported(t, "BindParam", err, "ncclParamBind", 23003)
		if err == nil || !strings.Contains(err.Error(), "requires NCCL 2.30.3, loaded 2.30.0") {
			t.Errorf("message %q", err)
		}
	})
}

// NCCL returns strings in thread-local buffers that its next call on the
// same thread overwrites: goroutines reading different parameters at once
// each get their own value.
func TestParamsConcurrent(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{fakeParams}}, func(t *testing.T) {
		keys := map[string]string{"NCCL_T_STR": "hello", "NCCL_T_I32": "-70000", "NCCL_T_U8": "250", "NCCL_DEBUG_TIMESTAMP_FORMAT": "[%F %T] "}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for k, want := range keys {
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 200 {
						if v, err := nccl.Param(k); err != nil || v != want {
							errs <- fmt.Errorf("Param(%s) = %q, %v; want %q", k, v, err, want)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}
