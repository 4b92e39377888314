package rendezvous

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Item 4: a write that fails part way (here a file-size limit, which a
// full disk or a quota acts like) leaves the store usable for everyone: the
// torn record is rolled back.
func TestFileStoreFailedWriteRollsBack(t *testing.T) {
	if path := os.Getenv("NCCL4GO_FSIZE_CHILD"); path != "" {
		fsizeChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "store")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFileStoreFailedWriteRollsBack$")
	cmd.Env = append(os.Environ(), "NCCL4GO_FSIZE_CHILD="+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "child ok") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s, err := OpenFileStore(path, nil)
	if err != nil {
		t.Fatalf("OpenFileStore after a failed write: %v", err)
	}
	defer s.Close()
	for k, want := range map[string]string{"a": "first", "b": "after"} {
		if v, err := s.Get(ctx, k); err != nil || string(v) != want {
			t.Fatalf("Get %s = %q, %v", k, v, err)
		}
	}
	if ok, err := s.Check(ctx, "big"); ok || err != nil {
		t.Fatalf("Check big = %v, %v: the failed write must not be stored", ok, err)
	}
}

func fsizeChild(path string) {
	fail := func(f string, a ...any) { fmt.Printf(f+"\n", a...); os.Exit(1) }
	ctx := context.Background()
	s, err := OpenFileStore(path, nil)
	if err != nil {
		fail("open: %v", err)
	}
	if err := s.Set(ctx, "a", []byte("first")); err != nil {
		fail("set a: %v", err)
	}
	st, _ := os.Stat(path)
	var old syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old)
	lim := old
	lim.Cur = uint64(st.Size()) + 100
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("child ok (no RLIMIT_FSIZE here:", err, ")")
		return
	}
	err = s.Set(ctx, "big", make([]byte, 64<<10))
	syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	if err == nil {
		fail("a Set past the file-size limit succeeded")
	}
	if err := s.Set(ctx, "b", []byte("after")); err != nil {
		fail("set b after the failed write: %v", err)
	}
	if v, err := s.Get(ctx, "a"); err != nil || string(v) != "first" {
		fail("get a: %q %v", v, err)
	}
	fmt.Println("child ok")
}

// Item 4: a torn record left by a writer that died mid-write is skipped by
// readers and cut off by the next writer.
func TestFileStoreTornTailRepaired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	ctx := context.Background()
	w, err := OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Set(ctx, "k", []byte("v"))
	st, _ := os.Stat(path)
	whole := st.Size()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(binary.LittleEndian.AppendUint32(nil, 10))
	f.Write([]byte("/half"))
	f.Close()
	r, err := OpenFileStore(path, nil) // a writer too (it counts itself in)
	if err != nil {
		t.Fatalf("open with a torn tail: %v", err)
	}
	defer r.Close()
	if v, err := r.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if err := w.Set(ctx, "k2", []byte("v2")); err != nil {
		t.Fatalf("Set after a torn tail: %v", err)
	}
	if v, err := r.Get(ctx, "k2"); err != nil || string(v) != "v2" {
		t.Fatalf("Get k2 = %q, %v", v, err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte("/half")) || int64(len(data)) <= whole {
		t.Fatalf("torn record not cut off: %q", data)
	}
}

// Item 5: a store still open notices that its file was replaced, even by
// one at least as long, and reads the new one.
func TestFileStoreNoticesReplacement(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "store")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	old, err := OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	old.Set(ctx, "k", []byte("old job"))
	if v, _ := old.Get(ctx, "k"); string(v) != "old job" {
		t.Fatalf("Get = %q", v)
	}
	next := filepath.Join(dir, "next")
	n, err := OpenFileStore(next, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.Set(ctx, "k", []byte("new job"))
	n.Set(ctx, "pad", bytes.Repeat([]byte{'x'}, 256))
	n.Close()
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	if v, err := old.Get(ctx, "k"); err != nil || string(v) != "new job" {
		t.Fatalf("Get after the file was replaced = %q, %v; want the new file's value", v, err)
	}
}
