//go:build ignore

// gen_syms writes zsyms.go: the Go side's table of the shim's NCCL
// functions (Sym constants, SymName, SymSince), read from the lists in
// shim.h.
//
//	go run gen_syms.go [-o zsyms.go]
package main

import (
	"flag"
	"log"
	"os"

	"github.com/nccl4go/nccl/internal/capi/internal/gensyms"
)

func main() {
	out := flag.String("o", "zsyms.go", "output file")
	flag.Parse()
	header, err := os.ReadFile("shim.h")
	if err != nil {
		log.Fatal(err)
	}
	src, err := gensyms.Generate(header)
	if err != nil {
		log.Fatalf("shim.h: %v", err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}
