package trace

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDumpWhileRecordingIsConsistent dumps while every communicator's single
// writer records (collectives and point-to-point, as the nccl package does
// under the communicator's lock) and a watchdog-like goroutine starts and
// completes them: every dump must agree with itself. No entry has a sequence
// number above its communicator's last_seq (or last_p2p_seq), a started or
// completed collective is within last_started_seq or last_completed_seq,
// last_completed_seq <= last_started_seq <= last_seq, and no entry's id
// reaches the number of operations recorded.
func TestDumpWhileRecordingIsConsistent(t *testing.T) {
	r := New(64)
	const comms = 3
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range comms {
		c := r.RegisterComm(CommInfo{Name: "c", Hash: uint64(i), Rank: 0, Size: 1})
		refs := make(chan Ref, 256)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(refs)
			for n := 0; !stop.Load(); n++ {
				ev := Event{Op: AllReduce, DataType: Float32, Count: 8, Watched: true}
				if n%4 == 3 {
					ev = Event{Op: Send, Peer: 0, Count: 8, Watched: true}
				}
				ref := c.Record(ev)
				select {
				case refs <- ref:
				default:
				}
			}
		}()
		go func() {
			defer wg.Done()
			for ref := range refs {
				c.Start(ref)
				c.Complete(ref)
			}
		}()
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	for dumps := 0; dumps < 20 || time.Now().Before(deadline); dumps++ {
		d := r.Snapshot("")
		if err := consistent(d); err != "" {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("dump %d contradicts itself: %s", dumps, err)
		}
	}
	stop.Store(true)
	wg.Wait()
}

// consistent says how d contradicts itself ("" when it does not).
func consistent(d *Dump) string {
	byID := map[uint32]DumpComm{}
	for _, c := range d.Comms {
		byID[c.ID] = c
		if c.LastCompletedSeq > c.LastStartedSeq || c.LastStartedSeq > c.LastSeq {
			return "counters out of order: " + jsonOf(c)
		}
	}
	recorded := d.Recorded
	for _, e := range d.Entries {
		c, ok := byID[e.Comm]
		if !ok {
			continue
		}
		switch {
		case e.Class == Collective && e.Seq > c.LastSeq:
			return "collective above last_seq: " + jsonOf(e) + " in " + jsonOf(c)
		case e.Class == PointToPoint && e.Seq > c.LastP2PSeq:
			return "p2p above last_p2p_seq: " + jsonOf(e) + " in " + jsonOf(c)
		case e.Class == Collective && e.State == Completed && e.Seq > c.LastCompletedSeq:
			return "completed above last_completed_seq: " + jsonOf(e) + " in " + jsonOf(c)
		case e.Class == Collective && e.State >= Started && e.Seq > c.LastStartedSeq:
			return "started above last_started_seq: " + jsonOf(e) + " in " + jsonOf(c)
		case e.ID >= recorded:
			return "entry id beyond recorded: " + jsonOf(e)
		}
	}
	return ""
}

func jsonOf(v any) string {
	if e, ok := v.(DumpEntry); ok {
		j, _ := e.MarshalJSON()
		return string(j)
	}
	return fmt.Sprintf("%+v", v)
}

// TestZeroValues: the zero Recorder and the zero Comm are usable: the zero
// Recorder records nothing until SetSize (like New(0)), registers
// communicators and dumps; the zero Comm counts sequence numbers.
func TestZeroValues(t *testing.T) {
	var r Recorder
	if d := r.Snapshot("zero"); d.Rank != -1 || len(d.Entries) != 0 || d.Schema != Schema {
		t.Errorf("zero recorder's snapshot: rank %d, %d entries, schema %q", d.Rank, len(d.Entries), d.Schema)
	}
	c := r.RegisterComm(CommInfo{Name: "z", Rank: 0, Size: 1})
	if ref := c.Record(Event{Op: AllReduce}); ref.Recorded() || ref.Seq() != 1 {
		t.Errorf("zero recorder recorded: %+v", ref)
	}
	r.SetSize(16)
	c.Record(Event{Op: AllReduce})
	if d := r.Snapshot(""); len(d.Entries) != 1 || d.Entries[0].Seq != 2 || len(d.Comms) != 1 {
		t.Errorf("after SetSize: %d entries, %d comms", len(d.Entries), len(d.Comms))
	}
	var zc Comm
	if ref := zc.Record(Event{Op: Send}); ref.Seq() != 1 || ref.Recorded() {
		t.Errorf("zero Comm: %+v", ref)
	}
	zc.Start(Ref{ticket: 1, seq: 1})
	zc.Close()
	if zc.Recorder() != nil {
		t.Error("zero Comm has a recorder")
	}
}

// TestSeqlockStoresOrderedOnWeakMemory: a writer's stores into a slot must
// not become visible before the store that marks the slot busy. Plain
// stores are ordered so only on amd64 (x86-TSO); every other architecture
// (arm64 in particular, where a plain store after the compare-and-swap may
// overtake it) must build the atomic (release) stores. The race build
// hides the difference, since it always uses atomic stores, so this test
// asks the go command which file each architecture compiles.
func TestSeqlockStoresOrderedOnWeakMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	for _, arch := range []string{"amd64", "arm64", "ppc64le", "riscv64", "386"} {
		cmd := exec.Command(goCmd, "list", "-f", "{{join .GoFiles \" \"}}", ".")
		cmd.Env = append(cmd.Environ(), "GOARCH="+arch, "GOOS=linux", "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list for %s: %v", arch, err)
		}
		files := strings.Fields(string(out))
		plain := slices.Contains(files, "word_plain.go")
		atomicStores := slices.Contains(files, "word_atomic.go")
		if want := arch == "amd64"; plain != want || atomicStores == want {
			t.Errorf("GOARCH=%s compiles %v: plain stores %v, want %v", arch, files, plain, want)
		}
	}
}

// TestOnByDefault: with NCCL4GO_TRACE_BUFFER unset the process's recorder
// records, DefaultEntries per communicator (PyTorch's 2000, rounded up to a
// power of two); "0" turns it off.
func TestOnByDefault(t *testing.T) {
	if n, note := entriesFromEnv("", false); n != DefaultEntries || note != "" || roundSize(n) < 2000 {
		t.Errorf("unset: %d entries (%q), want %d", n, note, DefaultEntries)
	}
	if n, _ := entriesFromEnv("0", true); n != 0 {
		t.Errorf("%s=0: %d entries, want 0 (off)", BufferEnv, n)
	}
	if _, set := os.LookupEnv(BufferEnv); !set && !Default().Enabled() {
		t.Errorf("Default() is off with %s unset", BufferEnv)
	}
}
