package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// command is one entry of the command table (commands.go), the only
// description of nccl4go's command line: the dispatcher, `nccl4go help`,
// `nccl4go CMD -h`, the package doc (doc.go) and the README's list of
// commands are all made from it (TestCommandDocs checks the last two).
type command struct {
	name     string // as typed after its parent: "compare"
	summary  string // one line, lower case, no final period
	synopsis string // operands and flags after the command's full name; "" for a group
	about    string // the paragraphs of -h; "" for none
	// getopt marks commands whose flags are read as C's getopt_long reads
	// them (perf, after nccl-tests): -b8, -b 8, --minbytes=8, and a long
	// flag always takes two dashes. The others also accept one dash before
	// a long flag (-json), as Go's flag package does.
	getopt bool
	// flagsFirst ends the flags at the first operand (run: what follows
	// PROGRAM is PROGRAM's); otherwise flags may follow operands.
	flagsFirst bool
	// ownSignals marks a command that handles SIGINT and SIGTERM itself
	// (run forwards them to its ranks): main's context, which the same
	// signals cancel, is not passed on, or one Ctrl-C would reach the ranks
	// as SIGINT or as SIGTERM, by a race.
	ownSignals bool
	// flags defines the command's flags on fs and returns what runs once
	// they are parsed; nil for a group, which only has subcommands.
	flags func(fs *pflag.FlagSet) action
	// flagHelp writes the flags for -h; nil: pflag's own FlagUsages.
	flagHelp func(w io.Writer, fs *pflag.FlagSet)
	subs     []*command
	footer   string // after the flags or subcommands in -h (environment, exit status)
}

// action runs a command once its flags are parsed.
type action func(ctx context.Context, in *invocation) error

// invocation is what a command is given to run.
type invocation struct {
	args           []string // the operands, after the flags
	line           []string // the arguments as given after the command's name
	stdout, stderr io.Writer
}

// errHelp is what a command returns after writing the help asked for
// (-h, --help, help): exit status 0.
var errHelp = pflag.ErrHelp

// usageError is a bad command line. main prints it, then the hint (a
// line naming the help to read) or, where no command was named, the
// group's help, and exits 2.
type usageError struct {
	msg  string
	hint string // set by the dispatcher: the help to read
}

// Error is the message, without the hint.
func (e *usageError) Error() string { return e.msg }

// usagef is a usage error of the running command; the dispatcher adds
// the hint.
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitError makes the program exit with a status of its own (run: the
// failed rank's).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// exitStatus prints err as the user sees it and returns the process's exit
// status (see exitStatuses).
func exitStatus(err error, stderr io.Writer) int {
	var uerr *usageError
	var eerr *exitError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "nccl4go: %v\n", err)
		if uerr.hint != "" {
			fmt.Fprint(stderr, strings.TrimSuffix(uerr.hint, "\n")+"\n")
		}
		return exitUsage
	case errors.As(err, &eerr):
		fmt.Fprintf(stderr, "nccl4go: %v\n", err)
		return eerr.code
	}
	fmt.Fprintf(stderr, "nccl4go: %v\n", err)
	return exitFailure
}

// run is the whole program but for printing the error and exiting: it
// runs the command that args (without the program name) name, or help.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dispatch(ctx, []*command{root}, args, stdout, stderr)
}

// dispatch runs the command at the end of path (root first) with args:
// a subcommand named by args[0], help, or the command's own action. Every
// command, nested ones included, runs through here.
func dispatch(ctx context.Context, path []*command, args []string, stdout, stderr io.Writer) error {
	c := path[len(path)-1]
	if len(args) > 0 {
		if sub := c.sub(args[0]); sub != nil {
			return dispatch(ctx, append(path[:len(path):len(path)], sub), args[1:], stdout, stderr)
		}
		if len(c.subs) > 0 && args[0] == "help" {
			return help(path, args[1:], stdout)
		}
	}
	if c.flags == nil { // a group
		switch {
		case len(args) == 0:
			return &usageError{msg: prefix(path) + "no command given", hint: "\n" + helpText(path)}
		case isHelpFlag(args[0]):
			fmt.Fprint(stdout, helpText(path))
			return errHelp
		}
		return withHint(path, usagef("unknown command %q", args[0]))
	}
	if c.ownSignals {
		ctx = context.WithoutCancel(ctx)
	}
	return invoke(ctx, path, args, stdout, stderr)
}

// invoke parses the flags of the command at path and runs it.
func invoke(ctx context.Context, path []*command, args []string, stdout, stderr io.Writer) error {
	c := path[len(path)-1]
	fs := pflag.NewFlagSet(fullName(path), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.SetInterspersed(!c.flagsFirst)
	act := c.flags(fs)
	line := args
	if !c.getopt {
		args = longFlags(fs, args, !c.flagsFirst)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, helpText(path))
			return errHelp
		}
		return withHint(path, flagError(fs, line, err, c.getopt))
	}
	return withHint(path, act(ctx, &invocation{args: fs.Args(), line: line, stdout: stdout, stderr: stderr}))
}

// flagError is the usage error for err, pflag's parse error of line. A
// long flag written with one dash where getopt reads it as letters
// (perf -json) gets a reminder.
func flagError(fs *pflag.FlagSet, line []string, err error, getopt bool) error {
	msg := err.Error()
	if !getopt {
		return usagef("%s", msg)
	}
	for _, a := range line {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && len(name) > 1 && fs.Lookup(name) != nil && strings.Contains(msg, a) {
			msg += fmt.Sprintf(" (long flags take two dashes: --%s)", name)
		}
	}
	return usagef("%s", msg)
}

// withHint gives a usage error of the command at path its name ("perf
// compare: ...") and its hint.
func withHint(path []*command, err error) error {
	var uerr *usageError
	if errors.As(err, &uerr) && uerr.hint == "" {
		uerr.msg = prefix(path) + uerr.msg
		uerr.hint = fmt.Sprintf("Run '%s -h' for usage.", fullName(path))
	}
	return err
}

// help is `nccl4go [GROUP] help [CMD...]`: the help of the command named.
func help(path []*command, names []string, stdout io.Writer) error {
	target := path
	for _, n := range names {
		sub := target[len(target)-1].sub(n)
		if sub == nil {
			return withHint(path, usagef("help %s: unknown command", strings.Join(names, " ")))
		}
		target = append(target[:len(target):len(target)], sub)
	}
	fmt.Fprint(stdout, helpText(target))
	return errHelp
}

// sub is c's subcommand called name, or nil.
func (c *command) sub(name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

func isHelpFlag(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// fullName is "nccl4go perf compare".
func fullName(path []*command) string {
	names := make([]string, len(path))
	for i, c := range path {
		names[i] = c.name
	}
	return strings.Join(names, " ")
}

// prefix is "trace: " under a group, "" at the top.
func prefix(path []*command) string {
	if len(path) == 1 {
		return ""
	}
	return fullName(path)[len("nccl4go "):] + ": "
}

// longFlags rewrites -name to --name where name is a flag of fs longer than
// one letter, or a one-letter long flag without a shorthand, so that Go's
// single-dash spelling (-json, -devices 0,1) keeps working beside pflag's
// two. Operands and flag values are left alone; with interspersed flags
// off, so is everything after the first operand (run's PROGRAM ARGS).
func longFlags(fs *pflag.FlagSet, args []string, interspersed bool) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			if a == "--" || !interspersed {
				return append(out, args[i:]...)
			}
			out = append(out, a)
			continue
		}
		long := strings.HasPrefix(a, "--")
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "" { // "-=", "---": pflag's to refuse
			out = append(out, a)
			continue
		}
		f := fs.Lookup(name)
		if !long && name != "h" && (len(name) > 1 || (f != nil && fs.ShorthandLookup(name) == nil)) {
			a = "-" + a
			long = true
		}
		out = append(out, a)
		if !long && f == nil {
			f = fs.ShorthandLookup(name[:1])
			hasValue = len(name) > 1
		}
		if f != nil && !hasValue && f.NoOptDefVal == "" && i+1 < len(args) {
			i++
			out = append(out, args[i]) // the flag's value, whatever it looks like
		}
	}
	return out
}

// helpText is the -h of the command at path.
func helpText(path []*command) string {
	c := path[len(path)-1]
	name := fullName(path)
	var b strings.Builder
	if c.flags != nil {
		fmt.Fprintf(&b, "Usage: %s %s\n", name, c.synopsis)
	} else {
		fmt.Fprintf(&b, "Usage: %s <command> [flags] [arguments]\n", name)
	}
	if c.flags != nil && len(c.subs) > 0 { // perf: its own synopsis, then its subcommands'
		for _, s := range c.subs {
			fmt.Fprintf(&b, "       %s %s %s\n", name, s.name, s.synopsis)
		}
	}
	if c.about != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(c.about))
	}
	if len(c.subs) > 0 && c.flags == nil { // perf's are in its usage lines
		fmt.Fprintf(&b, "\nCommands:\n")
		w := 0
		list := listed(path)
		for _, e := range list {
			w = max(w, len(e.name))
		}
		for _, e := range list {
			fmt.Fprintf(&b, "  %-*s  %s\n", w, e.name, e.c.summary)
		}
		fmt.Fprintf(&b, "\nRun '%s help <command>' or '%s <command> -h' for a command's flags.\n", name, name)
	}
	if c.flags != nil {
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		fs.SortFlags = false
		c.flags(fs)
		switch {
		case c.flagHelp != nil: // headings of its own
			b.WriteString("\n")
			c.flagHelp(&b, fs)
		case !fs.HasAvailableFlags():
		case c.getopt:
			fmt.Fprintf(&b, "\nFlags:\n%s", fs.FlagUsagesWrapped(100))
		default:
			var long string
			fs.VisitAll(func(f *pflag.Flag) {
				if long == "" && f.Shorthand == "" {
					long = f.Name
				}
			})
			fmt.Fprintf(&b, "\nFlags (one dash or two: -%s, --%s):\n%s", long, long, fs.FlagUsagesWrapped(100))
		}
	}
	if c.footer != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(c.footer))
	}
	return b.String()
}

// entry is a runnable command and its name below some group.
type entry struct {
	name string // "perf compare"
	c    *command
}

// listed is every runnable command under the group at path, in table
// order, nested ones included.
func listed(path []*command) []entry {
	var out []entry
	var walk func(prefix string, c *command)
	walk = func(prefix string, c *command) {
		if c.flags != nil {
			out = append(out, entry{strings.TrimSpace(prefix), c})
		}
		for _, s := range c.subs {
			walk(prefix+" "+s.name, s)
		}
	}
	for _, s := range path[len(path)-1].subs {
		walk(s.name, s)
	}
	return out
}

// boolFlag defines a flag that is true when given (--json) and takes
// --json=false; pflag's own bool flags show as --json[=true|false].
func boolFlag(fs *pflag.FlagSet, p *bool, name, short, usage string) {
	fs.VarPF((*switchValue)(p), name, short, usage).NoOptDefVal = "true"
}

// switchValue is a bool flag value that pflag's help shows without a
// value.
type switchValue bool

func (s *switchValue) String() string { return fmt.Sprint(bool(*s)) }
func (s *switchValue) Type() string   { return "bool" }
func (s *switchValue) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("want true or false")
	}
	*s = switchValue(b)
	return nil
}

// noOperands is the usage error of a command given an operand it does not
// take.
func noOperands(args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}
