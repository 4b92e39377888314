package rendezvous

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestFileStoreSemantics(t *testing.T) {
	s, err := OpenFileStore(filepath.Join(t.TempDir(), "store"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storeSemantics(t, s)
}

// The file holds torch's FileStore records: uint32 length + key, uint32
// length + value; keys prefixed "/", deletions "-/key", torch's refcount key.
func TestFileStoreTorchFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	s, err := OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.Set(ctx, "k", []byte("v1"))
	s.Delete(ctx, "k")
	s.Add(ctx, "n", 5)
	rec := func(b []byte, k, v string) []byte {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
		return append(b, v...)
	}
	want := rec(nil, "refcount/", "1")
	want = rec(want, "/k", "v1")
	want = rec(want, "-/k", "")
	want = rec(want, "/n", "5")
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file = %q (%v)\nwant %q", got, err, want)
	}
	// A record written by another program (as torch would) is read.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(rec(nil, "/fromtorch", "hello"))
	f.Close()
	if v, err := s.Get(ctx, "fromtorch"); err != nil || string(v) != "hello" {
		t.Fatalf("Get fromtorch = %q, %v", v, err)
	}
	s.Close()
	if _, err := s.Get(ctx, "n"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
}

func TestFileStoreCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	os.WriteFile(path, []byte{0xff, 0xff, 0xff, 0x7f, 'x'}, 0o644)
	_, err := OpenFileStore(path, nil)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenFileStore on a corrupt file = %v, want ErrCorrupt", err)
	}
}

func TestFileStoreRemoveAfter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	a, err := OpenFileStore(path, &FileStoreOptions{RemoveAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenFileStore(path, &FileStoreOptions{RemoveAfter: 2})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("file removed while a user still has it: %v", err)
	}
	b.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file not removed after the last user: %v", err)
	}
}

// Many FileStores on one file, in goroutines: a counter and a rendezvous.
func TestFileStoreConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store")
	const n = 16
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := OpenFileStore(path, nil)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			if _, err := s.Add(ctx, "count", 1); err != nil {
				errs <- err
				return
			}
			s.Set(ctx, "rank"+strconv.Itoa(i), []byte{byte(i)})
			if err := s.Wait(ctx, "rank0", "rank"+strconv.Itoa(n-1)); err != nil {
				errs <- err
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s, _ := OpenFileStore(path, nil)
	defer s.Close()
	if v, err := s.Get(ctx, "count"); err != nil || string(v) != strconv.Itoa(n) {
		t.Fatalf("count = %q, %v; want %d", v, err, n)
	}
}

// Two processes: the test binary re-runs itself as the second.
func TestFileStoreTwoProcesses(t *testing.T) {
	if path := os.Getenv("NCCL4GO_FILESTORE_CHILD"); path != "" {
		fileStoreChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "store")
	s, err := OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFileStoreTwoProcesses$")
	cmd.Env = append(os.Environ(), "NCCL4GO_FILESTORE_CHILD="+path)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := s.Add(ctx, "count", 1); err != nil {
			t.Fatal(err)
		}
		if i == 100 {
			s.Set(ctx, "parent", []byte("hello child"))
		}
	}
	v, err := s.Get(ctx, "child")
	if err != nil || string(v) != "hello parent" {
		t.Fatalf("Get child = %q, %v", v, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if v, err := s.Get(ctx, "count"); err != nil || string(v) != "400" {
		t.Fatalf("count = %q, %v; want 400 (both processes added 200)", v, err)
	}
}

func fileStoreChild(path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := OpenFileStore(path, nil)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer s.Close()
	for range 200 {
		if _, err := s.Add(ctx, "count", 1); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	if v, err := s.Get(ctx, "parent"); err != nil || string(v) != "hello child" {
		fmt.Println("child Get parent:", string(v), err)
		os.Exit(1)
	}
	s.Set(ctx, "child", []byte("hello parent"))
}
