package nccl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/capi"
)

// The version facts are spelled in three places for readers: the table of
// versions.go (which the code checks against), Config's field documentation
// and the struct comments of internal/capi/shim.h. These tests make the
// three agree.

// configFeature maps each Config field to its ncclConfig_t field.
var configFeature = map[string]feature{
	"Blocking": cfgBlocking, "CGAClusterSize": cfgCGAClusterSize, "MinCTAs": cfgMinCTAs, "MaxCTAs": cfgMaxCTAs,
	"NetName": cfgNetName, "SplitShare": cfgSplitShare, "TrafficClass": cfgTrafficClass, "CommName": cfgCommName,
	"CollNetEnable": cfgCollNetEnable, "CTAPolicy": cfgCTAPolicy, "ShrinkShare": cfgShrinkShare, "NVLSCTAs": cfgNVLSCTAs,
	"NChannelsPerNetPeer": cfgNChannelsPerNetPeer, "NVLinkCentricSched": cfgNVLinkCentricSched,
	"GraphUsageMode": cfgGraphUsageMode, "NumRMACtx": cfgNumRMACtx, "MaxP2PPeers": cfgMaxP2PPeers,
	"GraphStreamOrdering": cfgGraphStreamOrdering,
}

var releaseInDoc = regexp.MustCompile(`NCCL (\d+\.\d+\.\d+)\.?\s*$`)

// Every Config field but Device documents the first release of its
// ncclConfig_t field, as the table says.
func TestConfigDocsMatchVersionTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		for _, fld := range ts.Type.(*ast.StructType).Fields.List {
			for _, name := range fld.Names {
				if name.Name == "Device" {
					continue
				}
				seen[name.Name] = true
				feat, ok := configFeature[name.Name]
				if !ok {
					t.Errorf("Config.%s has no entry in configFeature (and so none in the version table)", name.Name)
					continue
				}
				m := releaseInDoc.FindStringSubmatch(strings.TrimSpace(fld.Doc.Text()))
				if m == nil {
					t.Errorf("Config.%s: its documentation names no first release (\"NCCL x.y.z.\" at its end)", name.Name)
					continue
				}
				if m[1] != feat.since().String() {
					t.Errorf("Config.%s documents NCCL %s; the version table says %s for %s", name.Name, m[1], feat.since(), features[feat].name)
				}
			}
		}
		return false
	})
	for name := range configFeature {
		if !seen[name] {
			t.Errorf("configFeature names Config.%s, which does not exist", name)
		}
	}
}

// shim.h's versioned structs comment each field added after the first
// layout with its release ("// 2.17" or "// 2.30.7 (...)"): the table agrees.
func TestShimStructCommentsMatchVersionTable(t *testing.T) {
	src, err := os.ReadFile("internal/capi/shim.h")
	if err != nil {
		t.Fatal(err)
	}
	field := regexp.MustCompile(`^\s*[a-zA-Z_][a-zA-Z0-9_ ]*?\**\s*\*?([a-zA-Z0-9_]+);\s*//\s*(\d+)\.(\d+)(?:\.(\d+))?`)
	checkStruct := func(name, prefix string) {
		text := string(src)
		end := strings.Index(text, "} "+name+";")
		if end < 0 {
			t.Fatalf("shim.h has no struct %s", name)
		}
		start := strings.LastIndex(text[:end], "typedef struct {")
		n := 0
		for _, line := range strings.Split(text[start:end], "\n") {
			m := field.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			feat, ok := featureNamed(prefix + m[1])
			if !ok {
				t.Errorf("shim.h %s.%s (%s): no such feature in the version table", name, m[1], strings.TrimSpace(line))
				continue
			}
			n++
			r := feat.since()
			want := m[2] + "." + m[3]
			got := strings.Join(strings.Split(r.String(), ".")[:2], ".")
			if m[4] != "" {
				want += "." + m[4]
				got = r.String()
			}
			if got != want {
				t.Errorf("shim.h says %s.%s is NCCL %s; the version table says %s", name, m[1], want, r)
			}
		}
		if n == 0 {
			t.Errorf("no release comments read from shim.h's %s", name)
		}
	}
	checkStruct("capi_config_v23007", "ncclConfig_t.")
	checkStruct("capi_devcomm_reqs_v23007", "ncclDevCommRequirements_t.")
}

func featureNamed(name string) (feature, bool) {
	for f := range numFeatures {
		if features[f].name == name {
			return f, true
		}
	}
	return 0, false
}

// Every feature has a name and a release, and the functions' releases come
// from the generated list.
func TestVersionTable(t *testing.T) {
	for f := range numFeatures {
		if features[f].name == "" || features[f].since < 21403 {
			t.Errorf("feature %d: %+v", f, features[f])
		}
	}
	if got := symSince(capi.SymCommShrink); got != 22703 {
		t.Errorf("ncclCommShrink since %s, want 2.27.3", got)
	}
	if capi.SymName[capi.SymCommShrink] != "ncclCommShrink" {
		t.Errorf("SymName[SymCommShrink] = %q", capi.SymName[capi.SymCommShrink])
	}
}
