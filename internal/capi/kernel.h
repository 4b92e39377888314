// nccl4go C shim: kernel launches (kernel.c). See cuda/launch.go.
#ifndef NCCL4GO_KERNEL_H
#define NCCL4GO_KERNEL_H

#include <stddef.h>
#include <stdint.h>

// The most arguments one launch passes (the driver's parameter space is 4 KiB
// or 32 KiB, so at most a few hundred arguments fit in any case).
#define CAPI_MAX_KERNEL_ARGS 256

// A launch: grid and block dimensions, dynamic shared memory, and the launch
// attributes the binding sets. cluster[0] == 0: no cluster dimensions.
typedef struct {
	unsigned grid[3];
	unsigned block[3];
	unsigned smem;
	unsigned cluster[3];
	int cooperative;
} capi_launch_cfg;

// capi_launch launches fn on stream with the nargs arguments whose bytes lie
// in buf at offs[i]: it builds the driver's array of argument pointers on
// the C stack (Go memory then holds no pointer the driver sees after the
// call returns). Without attributes it calls cuLaunchKernel; a cooperative
// launch or cluster dimensions use cuLaunchKernelEx where the driver has it,
// else cuLaunchCooperativeKernel (cooperative only). Returns a CUresult or
// CAPI_MISSING / CAPI_NOT_LOADED.
int capi_launch(uintptr_t ctx, uintptr_t fn, uintptr_t stream, const capi_launch_cfg *cfg, const unsigned char *buf,
		const uint16_t *offs, int nargs);

// capi_bench_launch_loop is the launch loop written in C, for the launch
// benchmark: it builds the argument array once and calls cuLaunchKernel
// iters times.
int capi_bench_launch_loop(uintptr_t ctx, uintptr_t fn, uintptr_t stream, const capi_launch_cfg *cfg,
			   const unsigned char *buf, const uint16_t *offs, int nargs, long iters, int ctx_each);

// capi_module_load loads a module from n bytes of CUBIN, PTX or fatbin
// (cuModuleLoadDataEx; the image is copied with a terminating NUL, which
// PTX needs). On failure the JIT's error log, if any, is in log.
int capi_module_load(uintptr_t ctx, uintptr_t *mod, const void *image, size_t n, char *log, size_t loglen);

#endif
