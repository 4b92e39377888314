package main

import (
	"fmt"
	"strings"
)

// root is the command table: every command of nccl4go, in the order help
// lists them, with its summary, synopsis, help and flags. Nothing else
// describes a command; doc.go and the README's list are made from this
// (go test ./cmd/nccl4go -run TestCommandDocs -update rewrites them).
var root = &command{
	name: "nccl4go",
	subs: []*command{
		infoCommand,
		probeCommand,
		perfCommand,
		traceCommand,
		runCommand,
	},
	footer: rootFooter(),
}

// Exit statuses of nccl4go, the one place they are defined; help, doc.go
// and the README print exitStatuses, and TestExitStatuses produces each.
const (
	exitOK      = 0 // success, help, and info's diagnosis
	exitFailure = 1 // the command failed: the error is on stderr
	exitUsage   = 2 // a bad command line
)

// exitStatuses says what each exit status means.
var exitStatuses = []struct{ status, meaning string }{
	{"0", "success; help; info's diagnosis, also when NCCL, the driver or a GPU is missing"},
	{"1", "the command failed, and says why on stderr (probe without NCCL or a GPU, perf with wrong results, a dump that cannot be read)"},
	{"2", "a bad command line: one line says what is wrong, the next where to read the usage"},
	{"N", "run: the status of the first rank that failed (128+N: killed by signal N; 127: the program cannot be started); " +
		"128+N when run itself was interrupted by signal N and every rank exited 0 (141: its stdout was closed)"},
}

// rootFooter is the end of `nccl4go help`: environment and exit statuses.
func rootFooter() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Environment:\n%s", envText())
	fmt.Fprintf(&b, "\nExit status:\n")
	for _, e := range exitStatuses {
		b.WriteString(hanging("  "+e.status+"  ", e.meaning, 92))
	}
	return b.String()
}

// hanging is label then text wrapped to width, the lines after the first
// indented under the text's start.
func hanging(label, text string, width int) string {
	w := wrapIndent(text, len(label), width)
	return label + strings.TrimLeft(w, " ")
}

// envText is the environment section of help and doc.go.
func envText() string {
	return fmt.Sprintf("  %-21s path of libnccl.so.2 (else the dynamic loader's search)\n  %-21s path of libcuda.so.1 (else the dynamic loader's search)\n",
		ncclLibraryEnv, cudaLibraryEnv)
}
