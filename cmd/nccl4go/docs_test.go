package main

import (
	"fmt"
	"go/format"
	"strings"
)

// The package doc (doc.go) and the README's list of commands are made from
// the command table by these functions; TestCommandDocs fails when either
// file differs, and `go test ./cmd/nccl4go -run TestCommandDocs -update`
// rewrites them.

// docGo is the whole of doc.go.
func docGo() string {
	var b strings.Builder
	b.WriteString("// Code generated from the command table (commands.go) by `go test -run TestCommandDocs -update`; DO NOT EDIT.\n\n")
	line := func(s string) {
		if s == "" {
			b.WriteString("//\n")
		} else {
			b.WriteString("// " + s + "\n")
		}
	}
	line("Command nccl4go inspects and exercises NVIDIA NCCL from Go.")
	line("")
	line("Usage:")
	line("")
	for _, e := range listed([]*command{root}) {
		line("\tnccl4go " + strings.TrimSpace(e.name+" "+e.c.synopsis))
		line("\t    " + e.c.summary)
	}
	line("")
	line("'nccl4go help COMMAND' and 'nccl4go COMMAND -h' show a command's flags. Long flags")
	line("take one dash or two (-json, --json), but for perf's and its subcommands', which are")
	line("read as nccl-tests' getopt reads them (two dashes: --json; -b8, -b 8, --minbytes=8).")
	line("")
	line("# Environment")
	line("")
	line("  - " + ncclLibraryEnv + ": the path of libnccl.so.2 (else the dynamic loader's search)")
	line("  - " + cudaLibraryEnv + ": the path of libcuda.so.1 (else the dynamic loader's search)")
	line("")
	line("# Exit status")
	line("")
	for _, e := range exitStatuses {
		line(fmt.Sprintf("  - %s: %s", e.status, e.meaning))
	}
	b.WriteString("package main\n")
	src, err := format.Source([]byte(b.String())) // gofmt's layout of doc comments
	if err != nil {
		return "doc.go does not format: " + err.Error()
	}
	return string(src)
}

// Markers of the README's generated list of commands.
const (
	readmeBegin = "<!-- nccl4go commands: generated from cmd/nccl4go/commands.go by `go test ./cmd/nccl4go -run TestCommandDocs -update` -->"
	readmeEnd   = "<!-- end of nccl4go commands -->"
)

// readmeCommands is the README's list of commands, markers included.
func readmeCommands() string {
	var b strings.Builder
	b.WriteString(readmeBegin + "\n")
	b.WriteString("| command | what it does |\n|---|---|\n")
	for _, e := range listed([]*command{root}) {
		syn := strings.ReplaceAll(strings.TrimSpace("nccl4go "+e.name+" "+e.c.synopsis), "|", `\|`)
		fmt.Fprintf(&b, "| `%s` | %s |\n", syn, strings.ReplaceAll(e.c.summary, "|", `\|`))
	}
	b.WriteString("\n| exit status | meaning |\n|---|---|\n")
	for _, e := range exitStatuses {
		fmt.Fprintf(&b, "| %s | %s |\n", e.status, e.meaning)
	}
	b.WriteString(readmeEnd + "\n")
	return b.String()
}
