package trace

import (
	"os"
	"strings"
	"testing"
)

// Every data type the recorder names has PyTorch's name too, and every
// operation a row; a type or operation added on one side only fails here
// (package nccl's TestTraceVocabulary ties dataTypes to the module's enum).
func TestTablesCoverEveryValue(t *testing.T) {
	if len(torchDTypes) != len(dataTypes) {
		t.Errorf("%d data types, %d PyTorch names", len(dataTypes), len(torchDTypes))
	}
	for i, n := range torchDTypes {
		if n == "" {
			t.Errorf("%s has no PyTorch name", DataType(i))
		}
	}
	for o := Op(1); o < numOps; o++ {
		if ops[o].name == "" {
			t.Errorf("Op(%d) has no row in ops", o)
		}
		if back, ok := ParseOp(o.String()); !ok || back != o {
			t.Errorf("ParseOp(%q) = %v, %v", o, back, ok)
		}
	}
}

// The dump schema in the package doc lists every word a dump uses for an
// operation, a data type and a built-in reduction operator.
func TestDocListsEveryWord(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var words []string
	for o := Op(1); o < numOps; o++ {
		words = append(words, o.String())
	}
	for _, d := range dataTypes {
		words = append(words, d.name)
	}
	words = append(words, redOpNames[:]...)
	for _, w := range words {
		if !strings.Contains(doc, `"`+w+`"`) {
			t.Errorf("the package doc's dump schema lacks %q", w)
		}
	}
}
