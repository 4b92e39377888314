package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// main is the only place the program exits (but for a rank's supervisor,
// maybeSupervise): commands return errors, so their deferred cleanup runs.
func main() {
	maybeSupervise()
	os.Exit(mainExit(os.Args[1:], os.Stdout, os.Stderr))
}

// mainExit runs the command and returns its exit status (exitStatuses),
// having printed its error.
func mainExit(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return exitStatus(run(ctx, args, stdout, stderr), stderr)
}
