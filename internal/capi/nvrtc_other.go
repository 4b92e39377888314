//go:build !linux || !cgo

package capi

func LoadNVRTC(path string) (string, bool)     { return noCgo, false }
func NVRTCPath() string                        { return "" }
func NVRTCVersion() (major, minor int, r int)  { return 0, 0, -1 }
func NVRTCErrorString(code int) string         { return "" }
func LoadNvJitLink(path string) (string, bool) { return noCgo, false }
func NvJitLinkPath() string                    { return "" }

// Compiled is what NVRTC or nvJitLink returned.
type Compiled struct {
	Code    int
	Stage   int
	Missing string
	Out     []byte
	Log     string
}

func NVRTCCompile(src, name string, opts []string, output int) Compiled {
	return Compiled{Code: -1, Missing: "NVRTC (" + noCgo + ")"}
}

func NvJitLink(opts []string, types []int32, inputs [][]byte) Compiled {
	return Compiled{Code: -1, Missing: "nvJitLink (" + noCgo + ")"}
}
