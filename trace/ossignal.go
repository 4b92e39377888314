package trace

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
)

// DumpOnSignal makes the recorder write a dump into dir (see DumpFile)
// each time the process receives one of sigs, and returns a function that
// stops it (idempotent). With no sigs it listens for [DefaultDumpSignal]
// (SIGUSR1 on Unix; on other systems there is no default and nothing is
// listened for). Each dump's path, or the error, goes to standard error as
// one line: a person sent the signal and looks there.
//
// While it listens, the signals no longer have their default effect
// (SIGUSR1 would end the process); after stop they have it again unless
// another part of the program listens too.
func (r *Recorder) DumpOnSignal(dir string, sigs ...os.Signal) (stop func()) {
	if len(sigs) == 0 {
		if DefaultDumpSignal == nil {
			return func() {}
		}
		sigs = []os.Signal{DefaultDumpSignal}
	}
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	exited := make(chan struct{})
	signal.Notify(ch, sigs...)
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case sig := <-ch:
				path, err := r.DumpFile(dir, "signal "+sig.String())
				if err != nil {
					fmt.Fprintf(os.Stderr, "nccl4go: trace: on %v: %v\n", sig, err)
				} else {
					fmt.Fprintf(os.Stderr, "nccl4go: trace: on %v: dumped the flight recorder to %s\n", sig, path)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			<-exited
		})
	}
}
