package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite doc.go and the README's list of commands from the command table")

// The package doc and the README's list of commands are the command
// table's: a command added, renamed or described anew in commands.go and
// not in them fails here.
func TestCommandDocs(t *testing.T) {
	if *update {
		if err := os.WriteFile("doc.go", []byte(docGo()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != docGo() {
		t.Errorf("doc.go is not the command table's (run go test ./cmd/nccl4go -run TestCommandDocs -update): %s", firstDiff(string(got), docGo()))
	}

	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start, end := strings.Index(readme, readmeBegin), strings.Index(readme, readmeEnd)
	if start < 0 || end < start {
		t.Fatalf("README.md has no list of commands between %q and %q", readmeBegin, readmeEnd)
	}
	end += len(readmeEnd) + 1
	if *update {
		readme = readme[:start] + readmeCommands() + readme[end:]
		if err := os.WriteFile("../../README.md", []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
		end = start + len(readmeCommands())
	}
	if readme[start:end] != readmeCommands() {
		t.Errorf("README.md's list of commands is not the command table's (run go test ./cmd/nccl4go -run TestCommandDocs -update): %s", firstDiff(readme[start:end], readmeCommands()))
	}
	// The layout table's row names every top-level command too.
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "| `cmd/nccl4go/`") {
			for _, c := range root.subs {
				if !strings.Contains(line, "`"+c.name+"`") {
					t.Errorf("README's layout row does not name %s: %s", c.name, line)
				}
			}
		}
	}
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is\n\t%q\nwant\n\t%q", i+1, gl, wl)
		}
	}
	return "same lines"
}

// A list of the table's commands as `nccl4go help` prints them must
// name each runnable command once, with its summary, and each one's -h,
// help CMD and the table agree: synopsis, about, every flag pflag knows.
func TestHelpIsTheTable(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &out, &bytes.Buffer{}); !errors.Is(err, errHelp) {
		t.Fatalf("help: %v", err)
	}
	top := out.String()
	entries := listed([]*command{root})
	if len(entries) < 8 {
		t.Fatalf("only %d commands listed", len(entries))
	}
	for _, e := range entries {
		if !strings.Contains(top, "  "+e.name+" ") || !strings.Contains(top, e.c.summary) {
			t.Errorf("nccl4go help lacks %q (%s):\n%s", e.name, e.c.summary, top)
		}
		if e.c.summary == "" || e.c.synopsis == "" || strings.HasSuffix(e.c.summary, ".") {
			t.Errorf("%s: summary %q, synopsis %q", e.name, e.c.summary, e.c.synopsis)
		}
		name := strings.Fields(e.name)
		var h1, h2 bytes.Buffer
		err1 := run(context.Background(), append(append([]string{}, name...), "-h"), &h1, &bytes.Buffer{})
		err2 := run(context.Background(), append([]string{"help"}, name...), &h2, &bytes.Buffer{})
		if !errors.Is(err1, errHelp) || !errors.Is(err2, errHelp) || h1.String() != h2.String() {
			t.Errorf("%s -h (%v) and help %s (%v) differ:\n%s\n---\n%s", e.name, err1, e.name, err2, h1.String(), h2.String())
		}
		help := h1.String()
		if !strings.HasPrefix(help, "Usage: nccl4go "+e.name+" "+e.c.synopsis+"\n") {
			t.Errorf("%s -h does not start with its synopsis:\n%s", e.name, help)
		}
		fs := pflag.NewFlagSet("", pflag.ContinueOnError)
		e.c.flags(fs)
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Annotations[perfGroup] == nil && e.name == "perf" {
				return // perf's unsupported flags are listed with their reasons
			}
			if !strings.Contains(help, "--"+f.Name) {
				t.Errorf("%s -h lacks --%s:\n%s", e.name, f.Name, help)
			}
		})
	}
}

// Every exit status of the table, produced by nccl4go's own main path (run
// interrupted by a signal, 128+N: TestRunForwardsTheSignalReceived and
// TestRunStdoutReaderGone).
func TestExitStatuses(t *testing.T) {
	requireSh(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"help"}, exitOK},
		{[]string{"info", "-h"}, exitOK},
		{[]string{"trace", "analyze", dir + "/missing.json"}, exitFailure},
		{[]string{"info", "--bogus"}, exitUsage},
		{[]string{"perf", "compare", "only-one.json"}, exitUsage},
		{[]string{"trace"}, exitUsage},
		{[]string{"run", "--quiet", "-n", "1", "sh", "-c", "exit 3"}, 3},
		{[]string{"run", "--quiet", "sh", "-c", "kill -9 $$"}, 128 + 9},
		{[]string{"run", "--quiet", dir + "/no-such-program"}, 127},
	} {
		var out, errb bytes.Buffer
		if got := mainExit(tc.args, &out, &errb); got != tc.want {
			t.Errorf("nccl4go %s: exit %d, want %d\nstderr:\n%s", strings.Join(tc.args, " "), got, tc.want, errb.String())
		}
	}
	if len(exitStatuses) != 4 {
		t.Errorf("exitStatuses has %d rows; add the new one's case here", len(exitStatuses))
	}
}

// run returns the failed rank's status instead of exiting from inside
// the command, so its deferred cleanup runs: the store it hosts for the
// job is closed when mainExit returns. (It called os.Exit, which ended
// this test binary with the rank's status.)
func TestRunDeferredCleanupRuns(t *testing.T) {
	requireSh(t)
	var out, errb syncBuffer
	code := mainExit([]string{"run", "--quiet", "--no-prefix", "sh", "-c", `echo "$NCCL4GO_STORE_ADDR"; exit 5`}, &out, &errb)
	if code != 5 {
		t.Fatalf("exit %d, want 5\nstderr:\n%s", code, errb.String())
	}
	addr := strings.TrimSpace(out.String())
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" {
		t.Fatalf("no store address printed: %q", addr)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatalf("the job's store at %s still accepts connections after run returned: its deferred Close did not run", addr)
	}
	if !strings.Contains(errb.String(), "nccl4go: run: rank 0 exited 5") {
		t.Errorf("stderr does not say which rank failed:\n%s", errb.String())
	}
}

// Only main (and the supervisor's entry, maybeSupervise) end the process:
// a command that exits skips its callers' deferred cleanup.
func TestOnlyMainExits(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		for name, f := range pkg.Files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil || fn.Name.Name == "main" || fn.Name.Name == "maybeSupervise" {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if ok && sel.Sel.Name == "Exit" {
						if id, ok := sel.X.(*ast.Ident); ok && (id.Name == "os" || id.Name == "syscall") {
							t.Errorf("%s: %s calls %s.Exit (line %d): return an error or an exit status instead", name, fn.Name.Name, id.Name, fset.Position(sel.Pos()).Line)
						}
					}
					return true
				})
			}
		}
	}
}

// Long flags keep Go's single dash outside perf, flag values and PROGRAM's
// arguments are left alone.
func TestLongFlags(t *testing.T) {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	bindRunFlags(fs)
	got := longFlags(fs, strings.Fields("-n 2 -env A=-json -grace=1s --quiet -- prog"), false)
	if want := "-n 2 --env A=-json --grace=1s --quiet -- prog"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
	got = longFlags(fs, strings.Fields("-n 2 prog -json -n 3"), false)
	if want := "-n 2 prog -json -n 3"; strings.Join(got, " ") != want {
		t.Errorf("PROGRAM's arguments: got %q, want %q", strings.Join(got, " "), want)
	}
	// The command lines of gpu_test.go, which only a GPU machine runs.
	for _, line := range []string{"info -json", "probe -devices 0", "probe -json"} {
		if err := parseOnly(strings.Fields(line)); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
	// As watchdog/testdata/gpu-faults.sh and examples/recover run it.
	got = longFlags(fs, strings.Fields("-n 3 -hostid-per-rank ./recover -timeout 5s -dumps /tmp/d"), false)
	if want := "-n 3 --hostid-per-rank ./recover -timeout 5s -dumps /tmp/d"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
	fs = pflag.NewFlagSet("", pflag.ContinueOnError)
	traceExportCommand.flags(fs)
	got = longFlags(fs, strings.Fields("dir -o out -format torch -h"), true)
	if want := "dir -o out --format torch -h"; strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
}

// Every nccl4go command line in the README's code blocks names a command
// of the table and its flags parse (nothing runs).
func TestREADMECommandLines(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(raw), "```")
	n := 0
	for i := 1; i < len(blocks); i += 2 {
		for _, line := range strings.Split(blocks[i], "\n") {
			line, _, _ = strings.Cut(line, "#")
			_, cmd, ok := strings.Cut(line, "nccl4go ")
			if !ok || strings.HasPrefix(line, "import") || strings.Contains(line, "\"") {
				continue
			}
			args := strings.Fields(cmd)
			if len(args) == 0 || root.sub(args[0]) == nil {
				continue
			}
			n++
			if err := parseOnly(args); err != nil {
				t.Errorf("README: nccl4go %s: %v", cmd, err)
			}
		}
	}
	if n < 8 {
		t.Errorf("found %d nccl4go command lines in the README", n)
	}
}

// parseOnly finds the command args name and parses its flags, as dispatch
// does, without running it.
func parseOnly(args []string) error {
	path := []*command{root}
	for len(args) > 0 {
		sub := path[len(path)-1].sub(args[0])
		if sub == nil {
			break
		}
		path, args = append(path, sub), args[1:]
	}
	c := path[len(path)-1]
	if c.flags == nil {
		return fmt.Errorf("%s is a group", fullName(path))
	}
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(!c.flagsFirst)
	c.flags(fs)
	if !c.getopt {
		args = longFlags(fs, args, !c.flagsFirst)
	}
	return fs.Parse(args)
}

// No command line panics in the parsing of any command's flags (a "-="
// did, in longFlags). Only the parsing runs: no action.
func FuzzCommandLine(f *testing.F) {
	for _, a := range []string{"-", "--", "-=", "--=", "-=x", "---x", "-h=1", "--help=x", "-json=", "-n=", "-n", "-o", "-env", "-b8", "-vx"} {
		f.Add(a, "x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, e := range listed([]*command{root}) {
			args := append(strings.Fields(e.name), a, b)
			parseOnly(args) // an error is fine; a panic fails
			parseOnly(append(strings.Fields(e.name), b, a))
		}
	})
}

// The README quotes perf's usage hint as perf prints it.
func TestREADMEQuotesHint(t *testing.T) {
	var errb bytes.Buffer
	mainExit([]string{"perf", "all_reduce", "-b", "12X"}, &bytes.Buffer{}, &errb)
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if hint := lines[len(lines)-1]; !strings.Contains(string(raw), "`"+hint+"`") {
		t.Errorf("README does not quote perf's hint %q", hint)
	}
}
