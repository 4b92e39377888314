package spin

import (
	"context"
	"errors"
	"testing"
	"time"
)

// steps replaces yield and sleep for one test and records what Wait did.
func steps(t *testing.T) *[]time.Duration {
	var got []time.Duration
	oy, os := yield, sleep
	yield = func() { got = append(got, 0) }
	sleep = func(d time.Duration) { got = append(got, d) }
	t.Cleanup(func() { yield, sleep = oy, os })
	return &got
}

func TestBackoffYieldsThenSleepsDoubling(t *testing.T) {
	got := steps(t)
	b := Backoff{Yields: 3, MinSleep: time.Millisecond, MaxSleep: 5 * time.Millisecond}
	for range 8 {
		b.Wait()
	}
	want := []time.Duration{0, 0, 0, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond}
	if len(*got) != len(want) {
		t.Fatalf("steps %v, want %v", *got, want)
	}
	for i := range want {
		if (*got)[i] != want[i] {
			t.Fatalf("steps %v, want %v", *got, want)
		}
	}
	b.Reset()
	*got = (*got)[:0]
	b.Wait()
	if (*got)[0] != 0 {
		t.Fatalf("after Reset the first step is %v, want a yield", (*got)[0])
	}
}

func TestBackoffZeroValueDefaults(t *testing.T) {
	got := steps(t)
	var b Backoff
	for range DefaultYields + 1 {
		b.Wait()
	}
	for i, d := range (*got)[:DefaultYields] {
		if d != 0 {
			t.Fatalf("step %d slept %v, want a yield", i, d)
		}
	}
	if d := (*got)[DefaultYields]; d != DefaultMinSleep {
		t.Fatalf("first sleep %v, want %v", d, DefaultMinSleep)
	}
}

func TestBackoffNoYields(t *testing.T) {
	got := steps(t)
	b := Backoff{Yields: -1}
	b.Wait()
	if (*got)[0] != DefaultMinSleep {
		t.Fatalf("first step %v, want a sleep of %v", (*got)[0], DefaultMinSleep)
	}
}

func TestWaitContextEndsSleepEarly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := Backoff{Yields: -1, MinSleep: time.Hour, MaxSleep: time.Hour}
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	done := make(chan error, 1)
	go func() { done <- b.WaitContext(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitContext = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitContext slept through its context's end")
	}
}

func TestWaitContextYieldReportsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b Backoff
	if err := b.WaitContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitContext = %v, want context.Canceled", err)
	}
}

func TestYieldReturns(t *testing.T) {
	for range 1000 {
		Yield()
	}
}

func BenchmarkYield(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Yield()
	}
}

func BenchmarkBackoffWaitYieldStep(b *testing.B) {
	b.ReportAllocs()
	bo := Backoff{Yields: 1 << 62}
	for b.Loop() {
		bo.Wait()
	}
}
