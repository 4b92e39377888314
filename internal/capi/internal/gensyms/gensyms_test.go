package gensyms

import (
	"strings"
	"testing"
)

const header = `
#define CAPI_NCCL_FUNCS(X)                                   \
	X(ncclGetVersion, 20305, 0, 0, (int *version), (version)) \
	X(ncclAllReduce, 20305, comm, CAPI_F_QUEUES, (uintptr_t send), (send))

#define CAPI_NCCL_SPECIAL_FUNCS(X) \
	X(ncclMemAlloc, 21901)
`

func TestParse(t *testing.T) {
	fns, err := Parse([]byte(header))
	if err != nil {
		t.Fatal(err)
	}
	want := []Func{{"ncclGetVersion", 20305}, {"ncclAllReduce", 20305}, {"ncclMemAlloc", 21901}}
	if len(fns) != len(want) {
		t.Fatalf("Parse = %v, want %v", fns, want)
	}
	for i := range want {
		if fns[i] != want[i] {
			t.Errorf("entry %d: %v, want %v", i, fns[i], want[i])
		}
	}
	src, err := Generate([]byte(header))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"SymGetVersion Sym = iota", "const NumSyms = 3", `SymMemAlloc:   "ncclMemAlloc"`, "SymMemAlloc:   21901"} {
		if !strings.Contains(string(src), s) {
			t.Errorf("generated source lacks %q:\n%s", s, src)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for name, h := range map[string]string{
		"duplicate":   strings.Replace(header, "ncclMemAlloc", "ncclAllReduce", 1),
		"bad release": strings.Replace(header, "21901", "219", 1),
		"stray line":  strings.Replace(header, "\tX(ncclAllReduce", "\tY(ncclAllReduce", 1),
		"no list":     strings.Replace(header, "CAPI_NCCL_SPECIAL_FUNCS", "OTHER", 1),
	} {
		if _, err := Parse([]byte(h)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
