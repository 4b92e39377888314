package main

import (
	"context"
	"errors"
	"io"
)

func runPerfAnalyze(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("perf analyze: in progress")
}
