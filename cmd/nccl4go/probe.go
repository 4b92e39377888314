package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nccl4go/nccl"
)

// probeReport is what `nccl4go probe -json` prints.
type probeReport struct {
	NCCL  probeNCCL   `json:"nccl"`
	Ranks []probeRank `json:"ranks"`
	// Notes explain the properties a rank could not report, once each.
	Notes []string `json:"notes,omitempty"`
	// DevicePaths say which device-API paths this machine can run
	// (probe_devapi.go).
	DevicePaths []probePath `json:"device_api_paths"`
}

type probeNCCL struct {
	Version string `json:"version"`
	Path    string `json:"path"`
}

type probeRank struct {
	Rank     int    `json:"rank"`
	NRanks   int    `json:"nranks"`
	Device   int    `json:"cuda_device"`
	GPU      string `json:"gpu"`
	PCIBusID string `json:"pci_bus_id"`
	// Properties is nil when the loaded NCCL cannot report them (before
	// 2.29.2); PropertiesError then says why.
	Properties      *nccl.Properties `json:"properties"`
	PropertiesError string           `json:"properties_error,omitempty"`
}

// probeCommand is `nccl4go probe`: one communicator over the GPUs of this
// machine, and what each rank can do.
var probeCommand = &command{
	name:     "probe",
	summary:  "create a communicator over the GPUs and show each rank's capabilities",
	synopsis: "[--json] [--devices 0,1,...] [--timeout 60s]",
	about: `Create one communicator over the visible GPUs (or those listed), one rank per GPU,
and show each rank's GPU and device-API capabilities (NCCL 2.29.2 and later). Where
NCCL or a GPU is missing it says what, and how to fix it, and exits 1.`,
	flags: func(fs *pflag.FlagSet) action {
		var jsonOut bool
		boolFlag(fs, &jsonOut, "json", "", "print one JSON document")
		var devices deviceList
		fs.Var(&devices, "devices", "comma-separated CUDA device `ordinals`, one rank each (default: every visible GPU)")
		timeout := fs.Duration("timeout", 60*time.Second, "give up creating or destroying the communicator after this `duration`")
		return func(ctx context.Context, in *invocation) error {
			if err := noOperands(in.args); err != nil {
				return err
			}
			if *timeout <= 0 {
				return usagef("--timeout %v: must be positive", *timeout)
			}
			return runProbe(ctx, jsonOut, devices.list, *timeout, in.stdout)
		}
	},
}

// runProbe probes devices (nil: every GPU) and prints the report.
func runProbe(ctx context.Context, jsonOut bool, devices []int, timeout time.Duration, stdout io.Writer) error {
	n := loadNCCL()
	_, gpuProblem := countGPUs()
	if n.problem != nil || gpuProblem != nil {
		e := &missingError{what: "probe"}
		if n.problem != nil {
			e.problems = append(e.problems, labeled{"NCCL", n.problem})
		}
		if gpuProblem != nil {
			e.problems = append(e.problems, labeled{"GPU", gpuProblem})
		}
		return e
	}

	rep, err := probe(ctx, n, devices, timeout)
	if len(rep.Ranks) == 0 {
		return err
	}
	// A failure to destroy still shows what was found, then exits 1.
	if jsonOut {
		return errors.Join(writeJSON(stdout, rep), err)
	}
	return errors.Join(printProbe(stdout, rep), err)
}

// probe creates the communicators, describes every rank and destroys them.
// The report is empty when err comes from anything but the destruction.
func probe(ctx context.Context, n ncclState, devices []int, timeout time.Duration) (rep probeReport, err error) {
	initCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Non-blocking, so that -timeout can end an init that never completes;
	// probe runs no collective, so NCCL's per-call cost for non-blocking
	// communicators does not matter.
	comms, err := nccl.InitAllContext(initCtx, devices, &nccl.Config{Blocking: nccl.Ptr(false)})
	if err != nil {
		err = condense(err)
		if errors.Is(err, context.DeadlineExceeded) {
			return rep, fmt.Errorf("creating the communicator did not finish within %v (raise --timeout): %w", timeout, err)
		}
		return rep, fmt.Errorf("creating the communicator: %w", err)
	}
	defer func() {
		// Destroy every communicator, even after an error or cancellation.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		for i, c := range comms {
			if derr := c.DestroyContext(dctx); derr != nil {
				err = errors.Join(err, fmt.Errorf("destroying the communicator of rank %d: %w", i, derr))
			}
		}
	}()

	rep = probeReport{NCCL: probeNCCL{Version: n.release.String(), Path: n.path}, Ranks: []probeRank{}}
	for _, c := range comms {
		r, note, err := describeRank(c)
		if err != nil {
			return probeReport{}, err
		}
		rep.Ranks = append(rep.Ranks, r)
		if note != "" && !slices.Contains(rep.Notes, note) {
			rep.Notes = append(rep.Notes, note)
		}
	}
	rep.DevicePaths = devicePaths(ctx, comms, timeout)
	return rep, nil
}

// describeRank reads a rank's identity and properties. note explains the
// properties it lacks, if any.
func describeRank(c *nccl.Communicator) (r probeRank, note string, err error) {
	if r.Rank, err = c.Rank(); err != nil {
		return r, "", err
	}
	if r.NRanks, err = c.NRanks(); err != nil {
		return r, "", err
	}
	dev, err := c.Device()
	if err != nil {
		return r, "", err
	}
	r.Device = int(dev)
	if r.GPU, err = dev.Name(); err != nil {
		return r, "", err
	}
	if r.PCIBusID, err = dev.PCIBusID(); err != nil {
		return r, "", err
	}
	p, err := c.Properties()
	if err != nil {
		r.PropertiesError = err.Error()
		return r, unsupportedNote("capability properties", err), nil
	}
	r.Properties = &p
	if p.NumLSATeams == nil {
		_, err := c.NumLSATeams() // says which release reports them
		note = unsupportedNote("LSA teams, host RMA support and railed GIN type", err)
	}
	return r, note, nil
}

// unsupportedNote reads "capability properties need NCCL 2.29.2 (loaded
// 2.28.3)" from an UnsupportedError, or "what: err" from another error.
func unsupportedNote(what string, err error) string {
	var ue *nccl.UnsupportedError
	switch {
	case err == nil:
		return what + ": not reported by the loaded NCCL"
	case errors.As(err, &ue):
		return fmt.Sprintf("%s need NCCL %s (loaded %s)", what, ue.Since, ue.Loaded)
	}
	return fmt.Sprintf("%s: %v", what, err)
}

// printProbe writes the report as a table, one row per rank.
func printProbe(w io.Writer, rep probeReport) error {
	gpus := map[int]bool{}
	for _, r := range rep.Ranks {
		gpus[r.Device] = true
	}
	fmt.Fprintf(w, "NCCL %s (%s): %s on %s\n\n", rep.NCCL.Version, rep.NCCL.Path,
		plural(len(rep.Ranks), "rank"), plural(len(gpus), "GPU"))
	t := newTable(w)
	t.row("RANK", "NRANKS", "DEVICE", "GPU", "BUS ID",
		"CUDA DEV", "NVML DEV", "DEVICE API", "MULTIMEM", "GIN", "LSA TEAMS", "HOST RMA", "RAILED GIN")
	for _, r := range rep.Ranks {
		cells := []string{strconv.Itoa(r.Rank), strconv.Itoa(r.NRanks), strconv.Itoa(r.Device), r.GPU, r.PCIBusID}
		if p := r.Properties; p != nil {
			cells = append(cells, strconv.Itoa(p.CUDADevice), strconv.Itoa(p.NVMLDevice),
				yesNo(p.DeviceAPISupport), yesNo(p.MultimemSupport), p.GINType.String(),
				optInt(p.NumLSATeams), optYesNo(p.HostRMASupport), optGIN(p.RailedGINType))
		} else {
			for range 8 {
				cells = append(cells, notAvailable)
			}
		}
		t.row(cells...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	printPaths(w, rep.DevicePaths)
	if len(rep.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range rep.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
	return nil
}

// deviceList is the -devices flag: "0,1,3".
type deviceList struct{ list []int }

// Type names the value in help (pflag.Value).
func (d *deviceList) Type() string { return "list" }

// String is the list as given, "0,1,3" (pflag.Value).
func (d *deviceList) String() string {
	if d == nil || d.list == nil {
		return ""
	}
	s := make([]string, len(d.list))
	for i, v := range d.list {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

// Set parses "0,1,3" (pflag.Value).
func (d *deviceList) Set(s string) error {
	var list []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 {
			return fmt.Errorf("%q is not a device ordinal (want e.g. 0,1,2)", f)
		}
		list = append(list, v)
	}
	d.list = list
	return nil
}
