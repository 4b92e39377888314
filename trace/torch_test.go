package trace

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// unpickle reads the pickle opcodes PyTorch's files (and ExportTorch's) use
// into Go values: map[string]any, []any, tuple, int64, float64, string,
// bool, nil. It is the test's independent reader of the format.
func unpickle(b []byte) (any, error) {
	var stack []any
	var marks []int
	memo := map[int]any{}
	pop := func() any { v := stack[len(stack)-1]; stack = stack[:len(stack)-1]; return v }
	popMark := func() []any {
		m := marks[len(marks)-1]
		marks = marks[:len(marks)-1]
		items := slices.Clone(stack[m:])
		stack = stack[:m]
		return items
	}
	for i := 0; i < len(b); {
		op := b[i]
		i++
		need := func(n int) ([]byte, error) {
			if i+n > len(b) {
				return nil, fmt.Errorf("truncated at %d", i)
			}
			s := b[i : i+n]
			i += n
			return s, nil
		}
		switch op {
		case 0x80:
			if _, err := need(1); err != nil {
				return nil, err
			}
		case '.':
			if len(stack) != 1 {
				return nil, fmt.Errorf("stop with %d values", len(stack))
			}
			return stack[0], nil
		case '(':
			marks = append(marks, len(stack))
		case 'N':
			stack = append(stack, nil)
		case 0x88:
			stack = append(stack, true)
		case 0x89:
			stack = append(stack, false)
		case 'J':
			s, err := need(4)
			if err != nil {
				return nil, err
			}
			stack = append(stack, int64(int32(binary.LittleEndian.Uint32(s))))
		case 'K':
			s, err := need(1)
			if err != nil {
				return nil, err
			}
			stack = append(stack, int64(s[0]))
		case 0x8a:
			s, err := need(1)
			if err != nil {
				return nil, err
			}
			n := int(s[0])
			s, err = need(n)
			if err != nil || n > 8 {
				return nil, fmt.Errorf("long of %d bytes", n)
			}
			var u uint64
			for k := n - 1; k >= 0; k-- {
				u = u<<8 | uint64(s[k])
			}
			if n > 0 && n < 8 && s[n-1]&0x80 != 0 {
				u |= ^uint64(0) << (8 * n)
			}
			stack = append(stack, int64(u))
		case 'G':
			s, err := need(8)
			if err != nil {
				return nil, err
			}
			stack = append(stack, math.Float64frombits(binary.BigEndian.Uint64(s)))
		case 'X':
			s, err := need(4)
			if err != nil {
				return nil, err
			}
			s, err = need(int(binary.LittleEndian.Uint32(s)))
			if err != nil {
				return nil, err
			}
			stack = append(stack, string(s))
		case ']':
			stack = append(stack, []any{})
		case '}':
			stack = append(stack, map[string]any{})
		case 'e':
			items := popMark()
			l := pop().([]any)
			stack = append(stack, append(l, items...))
		case 'a':
			v := pop()
			l := pop().([]any)
			stack = append(stack, append(l, v))
		case 'u':
			items := popMark()
			d := stack[len(stack)-1].(map[string]any)
			for k := 0; k+1 < len(items); k += 2 {
				d[items[k].(string)] = items[k+1]
			}
		case 's':
			v := pop()
			k := pop()
			stack[len(stack)-1].(map[string]any)[k.(string)] = v
		case 't':
			stack = append(stack, tuple(popMark()))
		case 0x86:
			v2, v1 := pop(), pop()
			stack = append(stack, tuple{v1, v2})
		case 'M':
			s, err := need(2)
			if err != nil {
				return nil, err
			}
			stack = append(stack, int64(binary.LittleEndian.Uint16(s)))
		case 0x8c, 'U', 'T':
			n := 1
			if op == 'T' {
				n = 4
			}
			s, err := need(n)
			if err != nil {
				return nil, err
			}
			l := int(s[0])
			if n == 4 {
				l = int(binary.LittleEndian.Uint32(s))
			}
			s, err = need(l)
			if err != nil {
				return nil, err
			}
			stack = append(stack, string(s))
		case 0x95: // FRAME: a length to skip
			if _, err := need(8); err != nil {
				return nil, err
			}
		case 0x94: // MEMOIZE
			memo[len(memo)] = stack[len(stack)-1]
		case 'q', 'r', 'h', 'j': // BINPUT, LONG_BINPUT, BINGET, LONG_BINGET
			n := 1
			if op == 'r' || op == 'j' {
				n = 4
			}
			s, err := need(n)
			if err != nil {
				return nil, err
			}
			k := int(s[0])
			if n == 4 {
				k = int(binary.LittleEndian.Uint32(s))
			}
			if op == 'q' || op == 'r' {
				memo[k] = stack[len(stack)-1]
			} else {
				stack = append(stack, memo[k])
			}
		default:
			return nil, fmt.Errorf("opcode %#x at %d not supported", op, i-1)
		}
	}
	return nil, fmt.Errorf("no stop opcode")
}

type tuple []any

// readDumpFiles reads the dumps at files, ending the test on any error.
func readDumpFiles(t *testing.T, files []string) []*Dump {
	t.Helper()
	var ds []*Dump
	for _, f := range files {
		d, err := ReadDumpFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}

// hangDumps reads testdata/hang: "world" of 4 ranks, rank 2 stuck in a
// Send on "pp" (a communicator of 2 whose other rank left no dump).
func hangDumps(t *testing.T) []*Dump {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "hang", "nccl4go-trace-*.json"))
	if err != nil || len(files) != 4 {
		t.Fatalf("testdata/hang: %v %v", files, err)
	}
	return readDumpFiles(t, files)
}

// torchEntryKeys are the keys of an entry PyTorch's analyzer reads
// (components/types.py and utils.py) or its C++ recorder always writes.
var torchEntryKeys = []string{
	"record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id",
	"profiling_name", "time_created_ns", "input_sizes", "input_dtypes", "output_sizes",
	"output_dtypes", "state", "time_discovered_started_ns", "time_discovered_completed_ns",
	"retired", "timeout_ms", "is_p2p", "thread_name", "thread_id",
}

// checkTorchFile checks one exported file against what PyTorch's analyzer
// reads, and returns its decoded top-level dict.
func checkTorchFile(t *testing.T, name string, data []byte) map[string]any {
	t.Helper()
	v, err := unpickle(data)
	if err != nil {
		t.Fatalf("%s: not a pickle: %v", name, err)
	}
	top, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: top level is %T, want a dict", name, v)
	}
	for _, k := range []string{"version", "pg_config", "pg_status", "entries", "comm_lib_version"} {
		if _, ok := top[k]; !ok {
			t.Errorf("%s: no %q", name, k)
		}
	}
	if ver, _ := top["version"].(string); len(strings.Split(ver, ".")) != 2 {
		t.Errorf("%s: version %q is not major.minor", name, ver)
	}
	pgc, _ := top["pg_config"].(map[string]any)
	for pg, c := range pgc {
		cm, _ := c.(map[string]any)
		ranks, _ := cm["ranks"].(string)
		if cm["name"] != pg || !strings.HasPrefix(ranks, "[") || !strings.HasSuffix(ranks, "]") {
			t.Errorf("%s: pg_config[%q] = %v", name, pg, c)
		}
		if _, ok := cm["desc"].(string); !ok {
			t.Errorf("%s: pg_config[%q] has no desc", name, pg)
		}
	}
	entries, _ := top["entries"].([]any)
	last := int64(-1)
	for i, ev := range entries {
		e, _ := ev.(map[string]any)
		for _, k := range torchEntryKeys {
			if _, ok := e[k]; !ok {
				t.Errorf("%s: entries[%d] has no %q", name, i, k)
			}
		}
		pg, _ := e["process_group"].(tuple)
		if len(pg) != 2 {
			t.Fatalf("%s: entries[%d].process_group = %v, want (name, desc)", name, i, e["process_group"])
		}
		if _, ok := pgc[pg[0].(string)]; !ok {
			t.Errorf("%s: entries[%d] names process group %v, not in pg_config", name, i, pg[0])
		}
		id, _ := e["record_id"].(int64)
		if id <= last {
			t.Errorf("%s: entries[%d].record_id %d after %d", name, i, id, last)
		}
		last = id
		// The analyzer's Op(): "nccl:<type>[ <meta>]", send "s->d", recv "d<-s".
		pn, _ := e["profiling_name"].(string)
		lib, rest, ok := strings.Cut(pn, ":")
		typ, meta, _ := strings.Cut(rest, " ")
		known := map[string]bool{"all_reduce": true, "broadcast": true, "reduce": true, "all_gather": true,
			"reduce_scatter": true, "all_to_all": true, "gather": true, "scatter": true, "split": true, "send": true, "recv": true}
		if !ok || lib != "nccl" || !known[typ] {
			t.Errorf("%s: entries[%d].profiling_name %q", name, i, pn)
		}
		switch typ {
		case "send", "recv":
			sep := map[string]string{"send": "->", "recv": "<-"}[typ]
			a, b, ok := strings.Cut(meta, sep)
			if _, err := strconv.Atoi(a); err != nil || !ok {
				t.Errorf("%s: %q", name, pn)
			}
			if _, err := strconv.Atoi(b); err != nil {
				t.Errorf("%s: %q", name, pn)
			}
			if e["is_p2p"] != true {
				t.Errorf("%s: %q not is_p2p", name, pn)
			}
		}
		if st := e["state"]; st != "scheduled" && st != "started" && st != "completed" {
			t.Errorf("%s: entries[%d].state %v", name, i, st)
		}
		for _, k := range []string{"input_sizes", "output_sizes"} {
			sizes, ok := e[k].([]any)
			if !ok {
				t.Errorf("%s: entries[%d].%s = %v, want a list of lists", name, i, k, e[k])
				continue
			}
			for _, s := range sizes {
				if _, ok := s.([]any); !ok {
					t.Errorf("%s: entries[%d].%s = %v, want a list of lists", name, i, k, e[k])
				}
			}
		}
	}
	return top
}

// TestExportTorch exports testdata/hang and checks every file against what
// PyTorch's analyzer reads, and the contents against the dumps.
func TestExportTorch(t *testing.T) {
	ds := hangDumps(t)
	files, err := ExportTorch(ds)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("%d files, want 4", len(files))
	}
	for r, f := range files {
		if f.Rank != r {
			t.Fatalf("file %d is rank %d", r, f.Rank)
		}
		top := checkTorchFile(t, fmt.Sprint("rank ", r), f.Data)
		if top["version"] != TorchVersion {
			t.Errorf("version %v", top["version"])
		}
		pgc := top["pg_config"].(map[string]any)
		world := pgc["0x00000005eed0f00d"].(map[string]any)
		if world["desc"] != "world" || world["ranks"] != "[0, 1, 2, 3]" {
			t.Errorf("rank %d: world's pg_config %v", r, world)
		}
		entries := top["entries"].([]any)
		var ars []map[string]any
		for _, ev := range entries {
			if e := ev.(map[string]any); e["profiling_name"] == "nccl:all_reduce" {
				ars = append(ars, e)
			}
		}
		want := 17
		if r == 2 {
			want = 16
		}
		if len(ars) != want {
			t.Fatalf("rank %d: %d all-reduces, want %d", r, len(ars), want)
		}
		e := ars[len(ars)-1]
		if e["collective_seq_id"] != int64(want) || e["is_p2p"] != false ||
			!equalJSON(e["input_sizes"], [][]int{{1024}}) || !equalJSON(e["output_sizes"], [][]int{{1024}}) ||
			!equalJSON(e["input_dtypes"], []string{"Float"}) {
			t.Errorf("rank %d: last all-reduce %v", r, e)
		}
		wantState := "completed"
		if r != 2 {
			wantState = "started" // #17: started, never completed
		}
		if e["state"] != wantState {
			t.Errorf("rank %d: all-reduce #%d state %v, want %s", r, want, e["state"], wantState)
		}
		if r == 2 {
			// Rank 2 is stuck in a Send to pp's rank 1, which left no dump:
			// it is placed at the next free process rank, 3.
			send := entries[len(entries)-1].(map[string]any)
			if send["profiling_name"] != "nccl:send 0->1" || send["is_p2p"] != true || send["p2p_seq_id"] != int64(1) ||
				send["collective_seq_id"] != int64(0) || send["state"] != "started" ||
				!equalJSON(send["input_dtypes"], []string{"BFloat16"}) || !equalJSON(send["input_sizes"], [][]int{{4096}}) {
				t.Errorf("rank 2's last entry %v", send)
			}
			if pp := pgc["0x0000000000000077"].(map[string]any); pp["ranks"] != "[2, 3]" || pp["desc"] != "pp" {
				t.Errorf("pp's pg_config %v", pp)
			}
		}
	}
	again, _ := ExportTorch(hangDumps(t))
	for i := range files {
		if !bytes.Equal(files[i].Data, again[i].Data) {
			t.Errorf("rank %d: two exports of the same dumps differ", i)
		}
	}
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestExportTorchRefuses: dumps without a process rank, or two dumps of one
// rank, are refused with a message that says which.
func TestExportTorchRefuses(t *testing.T) {
	ds := hangDumps(t)
	ds[1].Rank = -1
	if _, err := ExportTorch(ds); err == nil || !strings.Contains(err.Error(), "no process rank") {
		t.Errorf("rank -1: %v", err)
	}
	ds = hangDumps(t)
	ds[1].Rank = 0
	if _, err := ExportTorch(ds); err == nil || !strings.Contains(err.Error(), "both rank 0") {
		t.Errorf("two rank 0: %v", err)
	}
	if _, err := WriteTorchDir(t.TempDir(), "a/b", hangDumps(t)); err == nil {
		t.Error("a prefix with a slash was taken")
	}
}

// TestWriteTorchDirPython writes the files and loads them with Python's own
// pickle module, as PyTorch's loader does (pickle.load), checking the keys
// its loader reads. Skipped without python3.
func TestWriteTorchDirPython(t *testing.T) {
	dir := t.TempDir()
	paths, err := WriteTorchDir(dir, "", hangDumps(t))
	if err != nil {
		t.Fatal(err)
	}
	for r, p := range paths {
		if filepath.Base(p) != TorchPrefix+strconv.Itoa(r) {
			t.Errorf("file %s, want %s%d", p, TorchPrefix, r)
		}
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to load the pickles with:", err)
	}
	script := `
import os, pickle, re, sys, json
d = sys.argv[1]
out = {}
for f in sorted(os.listdir(d)):
    rank = int(f[len("` + TorchPrefix + `"):])
    with open(os.path.join(d, f), "rb") as fh:
        dump = pickle.load(fh)
    e = dump["entries"]
    out[rank] = [dump["version"], sorted(dump["pg_config"]), len(e), e[-1]["profiling_name"], e[-1]["process_group"][1], e[-1]["state"]]
print(json.dumps(out, sort_keys=True))
`
	got, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, got)
	}
	want := `{"0": ["2.10", ["0x00000005eed0f00d"], 17, "nccl:all_reduce", "world", "started"], ` +
		`"1": ["2.10", ["0x00000005eed0f00d"], 17, "nccl:all_reduce", "world", "started"], ` +
		`"2": ["2.10", ["0x0000000000000077", "0x00000005eed0f00d"], 17, "nccl:send 0->1", "pp", "started"], ` +
		`"3": ["2.10", ["0x00000005eed0f00d"], 17, "nccl:all_reduce", "world", "started"]}`
	if strings.TrimSpace(string(got)) != want {
		t.Errorf("python3 read:\n%s\nwant:\n%s", got, want)
	}
	// The test's own reader against Python's writer (protocols 2 and 4,
	// with memo), so that it reads torch's own files as Python does.
	for _, proto := range []string{"2", "4"} {
		pk, err := exec.Command(py, "-c", `import pickle, sys
v = {"version": "2.10", "n": [0, 1, 255, 256, 65536, -1, 2**40, -2**40], "f": 1.5, "t": ("a", "b"), "none": None, "b": [True, False]}
v["again"] = v["t"]
sys.stdout.buffer.write(pickle.dumps(v, protocol=`+proto+`))`).Output()
		if err != nil {
			t.Fatal(err)
		}
		v, err := unpickle(pk)
		if err != nil {
			t.Fatalf("protocol %s: %v", proto, err)
		}
		j, _ := json.Marshal(v)
		if w := `{"again":["a","b"],"b":[true,false],"f":1.5,"n":[0,1,255,256,65536,-1,1099511627776,-1099511627776],"none":null,"t":["a","b"],"version":"2.10"}`; string(j) != w {
			t.Errorf("protocol %s: read %s, want %s", proto, j, w)
		}
	}
}

// torchGolden is where the GPU run's golden files go: go/ the Go ranks'
// dumps of a killed-peer hang, torch/ their export that PyTorch's own
// analyzer read, fr_trace*.txt its output, missing_rank the rank killed.
var torchGolden = filepath.Join("testdata", "torch-golden")

// TestTorchGolden checks the export against the files PyTorch's analyzer
// read on the GPU machine: re-exporting the same dumps gives the same bytes
// (so the format did not drift from what torch 2.11 accepted), and the
// analyzer's output names the missing rank.
func TestTorchGolden(t *testing.T) {
	if _, err := os.Stat(torchGolden); os.IsNotExist(err) {
		t.Skipf("%s is not committed yet: unpack the tar that .gpu/rec/gpu.sh leaves in $OUT (rec-torch-golden.tar.gz) there", torchGolden)
	}
	goFiles, err := filepath.Glob(filepath.Join(torchGolden, "go", "nccl4go-trace-*.json"))
	if err != nil || len(goFiles) == 0 {
		t.Fatalf("no Go dumps in %s/go: %v", torchGolden, err)
	}
	ds := readDumpFiles(t, goFiles)
	files, err := ExportTorch(ds)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Join(torchGolden, "torch", TorchPrefix+strconv.Itoa(f.Rank))
		golden, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		checkTorchFile(t, name, golden)
		if !bytes.Equal(golden, f.Data) {
			t.Errorf("%s: the export of the same dumps differs from what PyTorch's analyzer read", name)
		}
	}
	// torch_own_dump is what torch's own recorder wrote on the same machine
	// (one all-reduce of a one-rank process group): every key it writes,
	// but the stack frames and NCCL's communicator state, is in ours too.
	if own, err := os.ReadFile(filepath.Join(torchGolden, "torch_own_dump")); err == nil {
		v, err := unpickle(own)
		if err != nil {
			t.Fatalf("torch_own_dump: %v", err)
		}
		ownTop := v.(map[string]any)
		if ownTop["version"] != TorchVersion {
			t.Errorf("torch's recorder writes version %v, ExportTorch %s", ownTop["version"], TorchVersion)
		}
		ours := checkTorchFile(t, "export", files[0].Data)
		for k := range ownTop {
			if _, ok := ours[k]; !ok && k != "nccl_comm_state" {
				t.Errorf("torch's dump has %q, the export does not", k)
			}
		}
		ownEntries, _ := ownTop["entries"].([]any)
		ourEntries, _ := ours["entries"].([]any)
		if len(ownEntries) > 0 && len(ourEntries) > 0 {
			for k := range ownEntries[len(ownEntries)-1].(map[string]any) {
				if _, ok := ourEntries[0].(map[string]any)[k]; !ok && k != "frames" {
					t.Errorf("torch's entries have %q, the export's do not", k)
				}
			}
		}
	}
	missing, err := os.ReadFile(filepath.Join(torchGolden, "missing_rank"))
	if err != nil {
		t.Fatal(err)
	}
	m := strings.TrimSpace(string(missing))
	outs, _ := filepath.Glob(filepath.Join(torchGolden, "fr_trace*.txt"))
	if len(outs) == 0 {
		t.Fatal("no analyzer output (fr_trace*.txt)")
	}
	named := false
	for _, o := range outs {
		b, err := os.ReadFile(o)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if strings.Contains(s, "{"+m+"}") || strings.Contains(s, "({"+m+"})") {
			named = true
		}
		if strings.Contains(s, "is not a supported operation") || strings.Contains(s, "KeyError") {
			t.Errorf("%s: PyTorch's analyzer could not read the export:\n%s", o, s)
		}
	}
	if !named {
		t.Errorf("no analyzer output names the missing rank %s", m)
	}
}
