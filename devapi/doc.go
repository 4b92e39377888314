// Package devapi runs NCCL's device API from Go: it finds the NCCL device
// headers that match the loaded library, compiles CUDA C++ kernels that
// #include <nccl_device.h> ([NVRTC], or nvcc where NVRTC cannot compile
// them), and holds ready kernels, such as an all-reduce through
// load/store-accessible (LSA) memory, compiled on first use.
//
// [Kernels] take the nccl package's DevComm and Window directly as
// arguments ([cuda.Function.Launch]): the DevComm is passed by value in the
// layout of the loaded release, which the kernel's headers must declare
// too. That is why the headers must match the library: [FindHeaders]
// refuses headers of another release.
//
// Which paths a machine can run depends on the communicator's device-API
// properties: [RequireLSA], [RequireMultimem] and [RequireGIN] say, with a
// reason, before a kernel that needs them is launched.
package devapi
