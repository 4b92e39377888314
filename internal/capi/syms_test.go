package capi_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/nccl4go/nccl/internal/capi"
	"github.com/nccl4go/nccl/internal/capi/internal/gensyms"
)

// zsyms.go is what gen_syms.go generates from shim.h.
func TestSymsAreGenerated(t *testing.T) {
	header, err := os.ReadFile("shim.h")
	if err != nil {
		t.Fatal(err)
	}
	want, err := gensyms.Generate(header)
	if err != nil {
		t.Fatalf("generating from shim.h: %v", err)
	}
	have, err := os.ReadFile("zsyms.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, have) {
		t.Fatal("zsyms.go is out of date: run `go generate ./internal/capi` (go run gen_syms.go)")
	}
}

// The generated table agrees with itself: Sym constants index SymName.
func TestSymTable(t *testing.T) {
	checks := map[capi.Sym]string{
		capi.SymGetVersion: "ncclGetVersion", capi.SymAllReduce: "ncclAllReduce",
		capi.SymCommWindowRegister: "ncclCommWindowRegister", capi.SymMemAlloc: "ncclMemAlloc",
	}
	for s, name := range checks {
		if capi.SymName[s] != name || s.String() != name {
			t.Errorf("Sym %d: SymName %q, String %q; want %q", int(s), capi.SymName[s], s.String(), name)
		}
	}
	if got := capi.Sym(-1).String(); got != "Sym(-1)" {
		t.Errorf("Sym(-1).String() = %q", got)
	}
	if capi.SymSince[capi.SymCommShrink] != 22703 || capi.SymSince[capi.SymGetLastError] != 21304 {
		t.Errorf("SymSince: CommShrink %d, GetLastError %d", capi.SymSince[capi.SymCommShrink], capi.SymSince[capi.SymGetLastError])
	}
}
