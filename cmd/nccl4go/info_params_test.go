package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nccl4go/nccl/internal/faketest"
)

func TestFakeInfoParams(t *testing.T) {
	faketest.Run(t, faketest.Env{Extra: []string{"NCCL_DEBUG=WARN"}}, func(t *testing.T) {
		out, _, err := runCLI(t, "info", "-params")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"PARAMETER", "NCCL_DEBUG ", "WARN", "NCCL_DEBUG_FILE", "NCCL_SET_THREAD_NAME"} {
			if !strings.Contains(out, want) {
				t.Errorf("info -params lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "NCCL_PARAM_DUMP_ALL") {
			t.Errorf("info -params lists a private parameter:\n%s", out)
		}
		out, _, err = runCLI(t, "info", "-json", "-params")
		if err != nil {
			t.Fatal(err)
		}
		var rep infoReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Params == nil || rep.Params.Values["NCCL_DEBUG"] != "WARN" || rep.Params.Problem != nil {
			t.Errorf("nccl_params %+v", rep.Params)
		}
		// Without the flag, nothing about parameters.
		out, _, _ = runCLI(t, "info")
		if strings.Contains(out, "PARAMETER") {
			t.Errorf("info without -params lists parameters")
		}
	})
}

func TestFakeInfoParamsUnsupported(t *testing.T) {
	faketest.Run(t, faketest.Env{Release: 22907}, func(t *testing.T) {
		out, _, err := runCLI(t, "info", "-params")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"NCCL parameters", "requires NCCL 2.30.3, loaded 2.29.7", "2.30.3 or later"} {
			if !strings.Contains(out, want) {
				t.Errorf("info -params on 2.29.7 lacks %q:\n%s", want, out)
			}
		}
	})
}
