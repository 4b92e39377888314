// nccl4go C shim: module loading and kernel launches. See kernel.h.
#include <stdlib.h>
#include <string.h>

#include "kernel.h"
#include "shim.h"

// CUlaunchConfig and CUlaunchAttribute as of CUDA 12.0 through 13.0 (cuda.h):
// 56 and 72 bytes.
typedef struct {
	unsigned gx, gy, gz, bx, by, bz, smem;
	uintptr_t stream;
	void *attrs;
	unsigned nattrs;
} cu_launch_config;

typedef struct {
	int id;
	char pad[4];
	union {
		char raw[64];
		struct {
			unsigned x, y, z;
		} cluster;
		int cooperative;
	} value;
} cu_launch_attr;

_Static_assert(sizeof(cu_launch_config) == 56, "CUlaunchConfig is 56 bytes");
_Static_assert(sizeof(cu_launch_attr) == 72, "CUlaunchAttribute is 72 bytes");

enum {
	CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
	CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
};

static int launch_params(void **params, const unsigned char *buf, const uint16_t *offs, int nargs) {
	if (nargs < 0 || nargs > CAPI_MAX_KERNEL_ARGS) {
		return 1; // CUDA_ERROR_INVALID_VALUE
	}
	for (int i = 0; i < nargs; i++) {
		params[i] = (void *)(buf + offs[i]);
	}
	return 0;
}

int capi_launch(uintptr_t ctx, uintptr_t fn, uintptr_t stream, const capi_launch_cfg *c, const unsigned char *buf,
		const uint16_t *offs, int nargs) {
	void *params[CAPI_MAX_KERNEL_ARGS + 1];
	if (launch_params(params, buf, offs, nargs)) {
		return 1;
	}
	params[nargs] = NULL;
	if (__builtin_expect(!c->cooperative && !c->cluster[0], 1)) {
		return capi_cuLaunchKernel(ctx, fn, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1],
					   c->block[2], c->smem, stream, params, NULL);
	}
	cu_launch_attr attrs[2];
	memset(attrs, 0, sizeof attrs);
	unsigned n = 0;
	if (c->cooperative) {
		attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
		attrs[n].value.cooperative = 1;
		n++;
	}
	if (c->cluster[0]) {
		attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
		attrs[n].value.cluster.x = c->cluster[0];
		attrs[n].value.cluster.y = c->cluster[1];
		attrs[n].value.cluster.z = c->cluster[2];
		n++;
	}
	cu_launch_config lc = {c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2], c->smem,
			       stream, attrs, n};
	int r = capi_cuLaunchKernelEx(ctx, &lc, fn, params, NULL);
	if (r == CAPI_MISSING && c->cooperative && !c->cluster[0]) {
		r = capi_cuLaunchCooperativeKernel(ctx, fn, c->grid[0], c->grid[1], c->grid[2], c->block[0],
						   c->block[1], c->block[2], c->smem, stream, params);
	}
	return r;
}

int capi_bench_launch_loop(uintptr_t ctx, uintptr_t fn, uintptr_t stream, const capi_launch_cfg *c,
			   const unsigned char *buf, const uint16_t *offs, int nargs, long iters, int ctx_each) {
	void *params[CAPI_MAX_KERNEL_ARGS + 1];
	if (launch_params(params, buf, offs, nargs)) {
		return 1;
	}
	params[nargs] = NULL;
	// The context is made current once; each iteration is then the
	// driver's cuLaunchKernel behind the trampoline's null checks. With
	// ctx_each 1, every iteration passes the context as the binding's
	// launches do (the trampoline asks the driver for the current one);
	// with 2, the thread has no current context during the loop (does the
	// driver launch a CUfunction in its own context?).
	uintptr_t prev = 0;
	if (ctx_each == 2) {
		if (capi_ctx_swap(0, &prev)) {
			return 2;
		}
		ctx = 0;
	}
	int r = capi_cuLaunchKernel(ctx, fn, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
				    c->smem, stream, params, NULL);
	uintptr_t again = ctx_each == 1 ? ctx : 0;
	for (long i = 1; i < iters && r == 0; i++) {
		capi_bench_after_call();
		r = capi_cuLaunchKernel(again, fn, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1],
					c->block[2], c->smem, stream, params, NULL);
	}
	if (ctx_each == 2) {
		capi_ctx_swap(prev, &prev);
	}
	return r;
}

enum {
	CU_JIT_ERROR_LOG_BUFFER = 5,
	CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

int capi_module_load(uintptr_t ctx, uintptr_t *mod, const void *image, size_t n, char *log, size_t loglen) {
	char *copy = malloc(n + 1);
	if (!copy) {
		return 2; // CUDA_ERROR_OUT_OF_MEMORY
	}
	memcpy(copy, image, n);
	copy[n] = 0;
	if (log && loglen) {
		log[0] = 0;
	}
	int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {log, (void *)(uintptr_t)loglen};
	int r = capi_cuModuleLoadDataEx(ctx, mod, copy, log && loglen ? 2 : 0, opts, vals);
	free(copy);
	return r;
}
