// Package nvrtc compiles CUDA C++ to [PTX], [CUBIN] or LTO-IR at run time with
// NVIDIA's NVRTC, and links LTO-IR with nvJitLink, for kernels a Go
// program launches through the cuda package ([cuda.Device.LoadModule],
// [cuda.Function.Launch]).
//
// # Loading
//
// Like NCCL and the driver, NVRTC is opened at run time (dlopen): building
// needs no CUDA toolkit. The first use loads, in order: the file named by
// [LibraryEnv], else libnvrtc.so.13 and libnvrtc.so.12 through the dynamic
// loader, the CUDA toolkit ($CUDA_HOME/lib64, /usr/local/cuda/lib64), and
// pip's nvidia-cuda-nvrtc package under the active virtual environment and
// the system's Python directories. When none loads, every call returns a
// *[LoadError] that lists each path tried and why it failed. nvJitLink is
// found the same way ([LinkLibraryEnv], libnvJitLink.so.13 / .12).
//
// # Compiling
//
// [Compile] takes the source and [Options]: the target architecture (by
// default the device's own, as sm_XY), include paths, macro definitions and
// any other NVRTC option. A failed compilation returns a *[CompileError]
// holding NVRTC's log, which names the file, line and error.
//
// # Cache
//
// [Cache] keeps compiled code on disk, keyed by the source, the options,
// the architecture, the output kind and the NVRTC version, so that a
// program compiles a kernel once per machine. It lives under
// $XDG_CACHE_HOME/nccl4go/kernels (os.UserCacheDir), and entries are
// written to a temporary file and renamed into place, so that ranks of a
// job compiling the same kernel at once never read a partial file.
package nvrtc
