package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl"
	"github.com/nccl4go/nccl/cuda"
)

// infoReport is what `nccl4go info -json` prints.
type infoReport struct {
	NCCL       ncclInfo      `json:"nccl"`
	CUDA       driverInfo    `json:"cuda_driver"`
	GPUs       []gpuInfo     `json:"gpus"`
	GPUProblem *problem      `json:"gpu_problem,omitempty"` // why there is no GPU
	Params     *paramsReport `json:"nccl_params,omitempty"` // -params (info_params.go)
}

type ncclInfo struct {
	Path        string   `json:"path,omitempty"`
	Version     string   `json:"version,omitempty"`      // "2.28.3"
	VersionCode int      `json:"version_code,omitempty"` // 22803
	Problem     *problem `json:"problem,omitempty"`
	// The binding (nccl.Versions): its module version and the NCCL
	// release whose ABI it was written against.
	Binding    string `json:"binding"`     // "v0.4.0", "(devel)"
	ABIRelease string `json:"abi_release"` // "2.31.2"
	// Features: which rows of the binding's version table the loaded
	// release has and which of those the binding uses with it, by group
	// (info_versions.go); absent without NCCL.
	Features []featureGroup `json:"features,omitempty"`
}

type driverInfo struct {
	Path        string   `json:"path,omitempty"`
	Version     string   `json:"version,omitempty"`      // the CUDA version the driver supports: "13.0"
	VersionCode int      `json:"version_code,omitempty"` // 13000
	Problem     *problem `json:"problem,omitempty"`
}

type gpuInfo struct {
	Index             int     `json:"index"`
	Name              string  `json:"name"`
	PCIBusID          string  `json:"pci_bus_id"`
	UUID              string  `json:"uuid"`
	ComputeCapability string  `json:"compute_capability"` // "9.0"
	MemoryBytes       uint64  `json:"memory_bytes"`
	MemoryGiB         float64 `json:"memory_gib"`
	Error             string  `json:"error,omitempty"` // the first query that failed
}

// infoCommand is `nccl4go info`: a diagnosis that exits 0 even when NCCL,
// the driver or every GPU is missing.
var infoCommand = &command{
	name:     "info",
	summary:  "show the NCCL library, CUDA driver and GPUs found (or what is missing), nccl4go's version and which gated NCCL features it uses with the library",
	synopsis: "[--json] [--params]",
	about: `Show the NCCL library and the CUDA driver this program loads, and every visible GPU;
nccl4go's own version and the NCCL release whose ABI it was written against; and, of the
features nccl4go gates by NCCL release (struct fields, flags, data types, behaviours),
how many it uses with the loaded NCCL: which the library lacks, with the release that
added each, and which it has but nccl4go does not use with it (a struct field of a
layout nccl4go does not declare to that release, or a flag whose field is not sent),
with why.
Where something is missing it says what, and how to fix it, and still exits 0.`,
	flags: func(fs *pflag.FlagSet) action {
		var jsonOut, params bool
		boolFlag(fs, &jsonOut, "json", "", "print one JSON document")
		boolFlag(fs, &params, "params", "", "also list NCCL's parameters and their values (NCCL 2.30.3 or later)")
		return func(ctx context.Context, in *invocation) error {
			if err := noOperands(in.args); err != nil {
				return err
			}
			rep := gatherInfo()
			if params {
				rep.Params = gatherParams(rep.NCCL.Problem == nil)
			}
			if jsonOut {
				return writeJSON(in.stdout, rep)
			}
			if err := printInfo(in.stdout, rep); err != nil {
				return err
			}
			return printParams(in.stdout, rep.Params)
		}
	},
}

// gatherInfo asks the libraries everything they can tell.
func gatherInfo() infoReport {
	var rep infoReport
	n := loadNCCL()
	rep.NCCL = ncclInfo{Path: n.path, Problem: n.problem, Binding: nccl.BindingVersion(), ABIRelease: nccl.ABIRelease.String()}
	if n.problem == nil {
		rep.NCCL.Version, rep.NCCL.VersionCode = n.release.String(), int(n.release)
		rep.NCCL.Features = featureGroups(n.release)
	}
	d := loadDriver()
	rep.CUDA = driverInfo{Path: d.path, VersionCode: d.version, Problem: d.problem}
	if d.version != 0 {
		rep.CUDA.Version = cuda.FormatDriverVersion(d.version)
	}
	rep.GPUs = []gpuInfo{}
	count, p := countGPUs()
	if p != nil && d.problem != nil {
		p = &problem{Reason: "no GPU: no CUDA driver (see above)"}
	}
	rep.GPUProblem = p
	for i := range count {
		rep.GPUs = append(rep.GPUs, describeGPU(cuda.Device(i)))
	}
	return rep
}

// describeGPU reads one GPU's identity; a failed query leaves its field
// empty and is kept in Error.
func describeGPU(d cuda.Device) gpuInfo {
	g := gpuInfo{Index: int(d)}
	keep := func(err error) {
		if err != nil && g.Error == "" {
			g.Error = err.Error()
		}
	}
	var err error
	g.Name, err = d.Name()
	keep(err)
	g.PCIBusID, err = d.PCIBusID()
	keep(err)
	g.UUID, err = d.UUID()
	keep(err)
	if major, minor, err := d.ComputeCapability(); err == nil {
		g.ComputeCapability = fmt.Sprintf("%d.%d", major, minor)
	} else {
		keep(err)
	}
	g.MemoryBytes, err = d.TotalMemory()
	keep(err)
	g.MemoryGiB = gib(g.MemoryBytes)
	return g
}

// printInfo writes the report as text: the libraries, then a GPU table.
func printInfo(w io.Writer, rep infoReport) error {
	t := newTable(w)
	if p := rep.NCCL.Problem; p != nil {
		t.problem("NCCL", p)
	} else {
		t.row("NCCL", rep.NCCL.Version, rep.NCCL.Path)
	}
	if rep.NCCL.Binding != "" {
		t.row("nccl4go", rep.NCCL.Binding, "written against NCCL "+rep.NCCL.ABIRelease+"'s ABI")
	}
	if p := rep.CUDA.Problem; p != nil {
		t.problem("CUDA driver", p)
	} else {
		t.row("CUDA driver", rep.CUDA.Version, rep.CUDA.Path)
	}
	if p := rep.GPUProblem; p != nil {
		t.problem("GPUs", p)
	} else {
		t.row("GPUs", strconv.Itoa(len(rep.GPUs)))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if err := printFeatures(w, nccl.Release(rep.NCCL.VersionCode), rep.NCCL.Features); err != nil {
		return err
	}
	if len(rep.GPUs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t = newTable(w)
	t.row("GPU", "NAME", "PCI BUS ID", "UUID", "CC", "MEMORY")
	var failed []gpuInfo
	for _, g := range rep.GPUs {
		mem := "?"
		if g.MemoryBytes != 0 {
			mem = formatGiB(g.MemoryBytes)
		}
		t.row(strconv.Itoa(g.Index), orUnknown(g.Name), orUnknown(g.PCIBusID), orUnknown(g.UUID),
			orUnknown(g.ComputeCapability), mem)
		if g.Error != "" {
			failed = append(failed, g)
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, g := range failed {
		fmt.Fprintf(w, "GPU %d: %s\n", g.Index, g.Error)
	}
	return nil
}
