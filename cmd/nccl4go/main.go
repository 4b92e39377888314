// Command nccl4go inspects and exercises NVIDIA NCCL from Go.
//
// Usage:
//
//	nccl4go info  [-json]                      what is installed: NCCL, CUDA driver, GPUs
//	nccl4go probe [-json] [-devices 0,1,...] [-timeout 60s]
//	                                           create a communicator over the GPUs and show
//	                                           what each rank can do
//	nccl4go perf TEST [nccl-tests flags] [--json] [--csv F] [--plot F.png]
//	                                           bandwidth and latency, as nccl-tests prints them
//	nccl4go perf compare A.json B.json ...     compare saved runs (ours or nccl-tests')
//	nccl4go perf analyze FILE.json ...         stragglers, spikes and warm-up in per-iteration times
//	nccl4go trace analyze [-json] DUMP|DIR...  read the flight recorder's dumps of all ranks
//	                                           and say where they disagree, who is behind
//	nccl4go run   -n N [-nnodes M -node-rank K -master-addr A -master-port P] PROGRAM [ARGS...]
//	                                           start N ranks of PROGRAM (torchrun's variables,
//	                                           a store for rendezvous.Init), prefix their
//	                                           output, stop all on the first failure and exit
//	                                           with its status
//	nccl4go trace analyze [-json] DUMP|DIR...  read the flight recorder's dumps of all ranks
//	                                           and say where they disagree, who is behind
//
// info is a diagnosis: where NCCL, the CUDA driver or a GPU is missing it says
// so, and how to fix it, and still exits 0. probe fails (exit 1) with the same
// explanation. A usage error exits 2.
//
// The NCCL library is found through NCCL_LIBRARY, else the dynamic loader's
// libnccl.so.2; the CUDA driver through NCCL4GO_CUDA_LIBRARY, else
// libcuda.so.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	maybeSupervise()
	os.Exit(mainExit(os.Args[1:], os.Stdout, os.Stderr))
}

// mainExit runs the command and returns its exit status: 0, 1 on error, 2 on
// a usage error.
func mainExit(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, args, stdout, stderr)
	var uerr *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "nccl4go: %v\n", err)
		if uerr.usage != nil {
			uerr.usage(stderr)
		}
		return 2
	}
	fmt.Fprintf(stderr, "nccl4go: %v\n", err)
	return 1
}

// command is one subcommand. Each lives in its own file.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands in the order usage shows them.
var commands = []command{
	{"info", "show the NCCL library, CUDA driver and GPUs found, or what is missing", runInfo},
	{"probe", "create a communicator over the GPUs and show each rank's capabilities", runProbe},
	{"perf", "measure bandwidth and latency as nccl-tests does (perf TEST, perf compare, perf analyze)", runPerf},
	{"trace", "read the flight recorder's dumps of all ranks and say what went wrong (trace analyze, trace export)", runTrace},
	{"run", "start N ranks of a program on this machine, torchrun-style, and supervise them", runCmd},
}

// usageError is a bad command line; usage, when set, prints the relevant help.
type usageError struct {
	msg   string
	usage func(w io.Writer)
}

// Error is the message, without the help.
func (e *usageError) Error() string { return e.msg }

// run is the whole program: it parses args (without the program name) and
// runs the subcommand, writing results to stdout and help to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return dispatch(ctx, "", commands, printUsage, args, stdout, stderr)
}

// dispatch runs the command of cmds that args[0] names: the program's
// commands (prefix "") or a command's subcommands (prefix "trace: ", ...).
// Help goes to stdout; a missing or unknown name is a usage error.
func dispatch(ctx context.Context, prefix string, cmds []command, usage func(io.Writer), args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &usageError{msg: prefix + "no command given", usage: usage}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return flag.ErrHelp
	}
	for _, c := range cmds {
		if c.name == name {
			return c.run(ctx, rest, stdout, stderr)
		}
	}
	return &usageError{msg: fmt.Sprintf("%sunknown command %q", prefix, name), usage: usage}
}

// printUsage lists the subcommands.
func printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: nccl4go <command> [flags]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'nccl4go <command> -h' for the flags of a command.\n")
	fmt.Fprintf(w, "Environment: %s (path of libnccl.so.2), %s (path of libcuda.so.1).\n", ncclLibraryEnv, cudaLibraryEnv)
}

// flagSet is a subcommand's flags and help.
type flagSet struct {
	*flag.FlagSet
	synopsis string // e.g. "[-json]"
	about    string // what the command does
}

// newFlagSet returns a flag set that reports errors instead of exiting or
// printing: parse prints.
func newFlagSet(name, synopsis, about string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, synopsis: synopsis, about: about}
}

// usage writes the subcommand's help.
func (fs *flagSet) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: nccl4go %s %s\n\n%s\n\nFlags:\n", fs.Name(), fs.synopsis, fs.about)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parse parses args and rejects positional arguments. A bad flag is a usage
// error carrying the subcommand's help; -h writes the help to stdout and
// returns flag.ErrHelp.
func (fs *flagSet) parse(args []string, stdout io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.usage(stdout)
			return err
		}
		return &usageError{msg: fmt.Sprintf("%s: %v", fs.Name(), err), usage: fs.usage}
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0)), usage: fs.usage}
	}
	return nil
}
