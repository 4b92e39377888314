// nccl4go C shim: loading, symbol tables and trampolines. See shim.h.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "group.h"
#include "shim.h"

// The generic trampolines call through an unprototyped pointer: every
// argument they pass is already cast to the C type NCCL or CUDA declares
// (pointer, int, unsigned, size_t), so the System V calling convention passes
// it exactly as a prototyped call would. The package builds with -std=gnu11,
// where "()" still means "unspecified parameters".
typedef int (*capi_any_fn)();

// ---------------------------------------------------------------------------
// NCCL symbol table.

// The first releases are not needed in C: zsyms.go holds them for the Go
// side's error messages.
#define CAPI_NAME_NCCL(name, since, gate, flags, params, args) #name,
#define CAPI_NAME_NCCL_SPECIAL(name, since) #name,
static const char *const nccl_names[CAPI_NCCL_SYM_COUNT] = {
	CAPI_NCCL_FUNCS(CAPI_NAME_NCCL) CAPI_NCCL_SPECIAL_FUNCS(CAPI_NAME_NCCL_SPECIAL)};

static void *nccl_handle;
static void *nccl_syms[CAPI_NCCL_SYM_COUNT];

const char *capi_nccl_sym_name(int i) { return (i >= 0 && i < CAPI_NCCL_SYM_COUNT) ? nccl_names[i] : NULL; }

int capi_nccl_sym_present(int i) { return (i >= 0 && i < CAPI_NCCL_SYM_COUNT) && nccl_syms[i] != NULL; }

// ---------------------------------------------------------------------------
// CUDA symbol table.

#define CAPI_ENUM_CUDA(name, params, args) CAPI_CU_##name,
#define CAPI_ENUM_CUDA_INTERNAL(name) CAPI_CU_##name,
enum { CAPI_CUDA_FUNCS(CAPI_ENUM_CUDA) CAPI_CUDA_INTERNAL_FUNCS(CAPI_ENUM_CUDA_INTERNAL) CAPI_CUDA_SYM_COUNT };

#define CAPI_NAME_CUDA(name, params, args) #name,
#define CAPI_NAME_CUDA_INTERNAL(name) #name,
static const char *const cuda_names[CAPI_CUDA_SYM_COUNT] = {
	CAPI_CUDA_FUNCS(CAPI_NAME_CUDA) CAPI_CUDA_INTERNAL_FUNCS(CAPI_NAME_CUDA_INTERNAL)};

static void *cuda_handle;
static void *cuda_syms[CAPI_CUDA_SYM_COUNT];

#define CUDA_FN(name) ((capi_any_fn)cuda_syms[CAPI_CU_##name])

// ---------------------------------------------------------------------------
// Loading.

static void set_err(char *err, size_t errlen, const char *msg) {
	if (err && errlen) {
		snprintf(err, errlen, "%s", msg ? msg : "unknown error");
	}
}

static void *open_lib(const char *path, const char *probe, char *err, size_t errlen) {
	dlerror();
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		set_err(err, errlen, dlerror());
		return NULL;
	}
	if (!dlsym(h, probe)) {
		char msg[512];
		snprintf(msg, sizeof msg, "%s: has no %s", path, probe);
		set_err(err, errlen, msg);
		dlclose(h);
		return NULL;
	}
	return h;
}

static const char *lib_path(void *sym) {
	Dl_info info;
	if (!sym || !dladdr(sym, &info)) {
		return NULL;
	}
	return info.dli_fname;
}

// load_table opens the library at path once (*handle is NULL until then;
// what names it in the error when it is not) and resolves every name of
// names into syms, NULL where the library lacks it.
static int load_table(void **handle, void **syms, const char *const *names, int n, const char *what,
		      const char *path, const char *probe, char *err, size_t errlen) {
	if (*handle) {
		char msg[128];
		snprintf(msg, sizeof msg, "%s is already loaded", what);
		set_err(err, errlen, msg);
		return -1;
	}
	void *h = open_lib(path, probe, err, errlen);
	if (!h) {
		return -1;
	}
	for (int i = 0; i < n; i++) {
		syms[i] = dlsym(h, names[i]);
	}
	*handle = h;
	return 0;
}

int capi_nccl_load(const char *path, char *err, size_t errlen) {
	return load_table(&nccl_handle, nccl_syms, nccl_names, CAPI_NCCL_SYM_COUNT, "NCCL", path, "ncclGetVersion",
			  err, errlen);
}

const char *capi_nccl_path(void) { return lib_path(nccl_syms[CAPI_SYM_ncclGetVersion]); }

void capi_nccl_unload(void) {
	if (nccl_handle) {
		memset(nccl_syms, 0, sizeof nccl_syms);
		dlclose(nccl_handle);
		nccl_handle = NULL;
	}
}

int capi_cuda_load(const char *path, char *err, size_t errlen) {
	return load_table(&cuda_handle, cuda_syms, cuda_names, CAPI_CUDA_SYM_COUNT, "the CUDA driver", path,
			  "cuDriverGetVersion", err, errlen);
}

const char *capi_cuda_path(void) { return lib_path(cuda_syms[CAPI_CU_cuDriverGetVersion]); }

// ---------------------------------------------------------------------------
// Status helpers.

static capi_status missing_nccl(void) {
	capi_status s = {capi_nccl_missing(), NULL};
	return s;
}

// missing_cuda is what a call of a CUDA function the shim has no address
// for returns (capi_nccl_missing's rule for the driver).
static int missing_cuda(void) { return cuda_handle ? CAPI_MISSING : CAPI_NOT_LOADED; }

char *capi_ncclGetLastError(void) {
	typedef const char *(*fn_t)(void *);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclGetLastError];
	if (!f) {
		return NULL;
	}
	const char *msg = f(NULL);
	if (!msg || !*msg) {
		return NULL;
	}
	return strdup(msg);
}

// ncclSuccess (0) and ncclInProgress (7) are not failures: no detail.
static capi_status nccl_status(int code) {
	capi_status s = {code, NULL};
	if (code != 0 && code != 7) {
		s.detail = capi_ncclGetLastError();
	}
	return s;
}

const char *capi_ncclGetErrorString(int result) {
	typedef const char *(*fn_t)(int);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclGetErrorString];
	return f ? f(result) : NULL;
}

// ---------------------------------------------------------------------------
// The gate: what a gated trampoline checks before it calls.

// How many communicators that NCCL runs non-blocking are alive. Only they
// can be left with an operation in progress, so while there are none the
// gate skips its ncclCommGetAsyncError (about a third of the binding's cost
// per collective).
static int nonblocking_live;

int capi_gate_busy;

void capi_nonblocking_add(int delta) {
	__atomic_add_fetch(&nonblocking_live, delta, __ATOMIC_RELAXED);
	__atomic_add_fetch(&capi_gate_busy, delta, __ATOMIC_RELAXED);
}

// gate_slow is the gate's full check, taken while there is something to
// check (see gate_enter). It returns CAPI_ORPHANED or CAPI_HELD when a call
// that queues work would join another thread's group (group.c),
// CAPI_PENDING while comm's previous operation is in progress; else 0, and
// inside a group a call that queues work records comm.
static __attribute__((noinline)) int gate_slow(int queues, uintptr_t comm) {
	if (queues) {
		int g = group_conflict(comm);
		if (g) {
			return g;
		}
	}
	typedef int (*fn_t)(void *, int *);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclCommGetAsyncError];
	if (f && __atomic_load_n(&nonblocking_live, __ATOMIC_RELAXED) > 0) {
		int state = 0;
		if (f((void *)comm, &state) == 0 && state == 7) {
			return CAPI_PENDING;
		}
	}
	if (queues) {
		group_track(comm);
	}
	return 0;
}

// gate_enter runs before a gated call on comm (flags are the call's
// compile-time CAPI_F_ flags). The common case is one relaxed load of a
// process-wide counter: no thread-local access, no lock. A call that queues
// work has nothing to check while no thread has a group open, no group
// record exists and no non-blocking communicator is alive
// (capi_gate_busy == 0: then the calling thread is in no group either, as
// its own GroupStart would have counted); any other gated call, while no
// non-blocking communicator is alive.
static inline __attribute__((always_inline)) int gate_enter(int flags, uintptr_t comm) {
	int busy = (flags & CAPI_F_QUEUES) ? __atomic_load_n(&capi_gate_busy, __ATOMIC_RELAXED)
					   : __atomic_load_n(&nonblocking_live, __ATOMIC_RELAXED);
	if (__builtin_expect(busy == 0, 1)) {
		return 0;
	}
	return gate_slow(flags & CAPI_F_QUEUES, comm);
}

// repair_group_depth undoes a group depth NCCL leaked: some of its calls
// return early after ncclGroupStartInternal without the matching end (in
// 2.28.3 through 2.30.7: ncclCommDestroy when the communicator is broken or
// destroyed, ncclCommAbort, and the InitRank family and ncclCommGrow when
// cudaGetDevice fails). A leaked depth makes the thread's next init or
// collective silently wait for a group end that never comes. Outside a
// group of the caller's, one ncclGroupEnd restores depth 0; where NCCL did
// not leak, it only answers "not in a group", which is ignored.
static void repair_group_depth(int code) {
	if (code == 0 || code == 7 || group_open_here()) {
		return;
	}
	capi_any_fn end = (capi_any_fn)nccl_syms[CAPI_SYM_ncclGroupEnd];
	if (end) {
		end();
	}
}

// ---------------------------------------------------------------------------
// Generic NCCL trampolines. flags_ is a constant in each: the compiler
// keeps only the branches the call needs. For a collective while nothing
// needs checking, the path is: load the function pointer, load
// capi_gate_busy, call, return the status.

#define CAPI_TRAMP_NCCL(name, since, gate, flags, params, args)                  \
	capi_status capi_##name params {                                         \
		enum { flags_ = (flags) };                                       \
		capi_any_fn f = (capi_any_fn)nccl_syms[CAPI_SYM_##name];         \
		if (__builtin_expect(!f, 0)) {                                   \
			return missing_nccl();                                   \
		}                                                                \
		if ((uintptr_t)(gate) != 0) {                                    \
			int g_ = gate_enter(flags_, (uintptr_t)(gate));          \
			if (g_) {                                                \
				capi_status p = {g_, NULL};                      \
				return p;                                        \
			}                                                        \
		}                                                                \
		capi_status s = nccl_status(f args);                             \
		if (flags_ & CAPI_F_GROUP_START) {                               \
			if (s.code == 0) {                                       \
				group_started();                                 \
			}                                                        \
		}                                                                \
		if (flags_ & CAPI_F_GROUP_END) {                                 \
			group_ended();                                           \
		}                                                                \
		if (flags_ & CAPI_F_LEAKS_DEPTH) {                               \
			repair_group_depth(s.code);                              \
		}                                                                \
		return s;                                                        \
	}
CAPI_NCCL_FUNCS(CAPI_TRAMP_NCCL)
#undef CAPI_TRAMP_NCCL

// ---------------------------------------------------------------------------
// Context handling for the calls that bind to the current device.

// ctx_enter makes ctx current on this thread and returns the previous one in
// *prev. It returns a CUresult.
static int ctx_enter(uintptr_t ctx, uintptr_t *prev) {
	*prev = ctx;
	if (!ctx) {
		return 0;
	}
	if (!cuda_handle) {
		return CAPI_NOT_LOADED;
	}
	uintptr_t cur = 0;
	int r = CUDA_FN(cuCtxGetCurrent)((void **)&cur);
	if (r) {
		return r;
	}
	*prev = cur;
	if (cur == ctx) {
		return 0;
	}
	return CUDA_FN(cuCtxSetCurrent)((void *)ctx);
}

static void ctx_leave(uintptr_t ctx, uintptr_t prev) {
	if (ctx && prev != ctx) {
		CUDA_FN(cuCtxSetCurrent)((void *)prev);
	}
}

// An NCCL-shaped status for a failure to make the context current:
// ncclUnhandledCudaError with the CUDA error in the detail.
static capi_status ctx_failure(int curesult) {
	capi_status s = {1, NULL};
	char msg[256];
	const char *name = NULL;
	if (curesult == CAPI_NOT_LOADED) {
		snprintf(msg, sizeof msg, "cannot make the device's context current: the CUDA driver is not loaded");
	} else {
		if (cuda_syms[CAPI_CU_cuGetErrorName]) {
			CUDA_FN(cuGetErrorName)(curesult, &name);
		}
		snprintf(msg, sizeof msg, "cannot make the device's context current: CUDA error %d (%s)", curesult,
			 name ? name : "unknown");
	}
	s.detail = strdup(msg);
	return s;
}

// CAPI_IN_CTX runs call (an NCCL call) with ctx current and leaves its
// status in st_; a context that cannot be made current returns at once.
#define CAPI_IN_CTX(ctx, call)                      \
	uintptr_t prev_;                            \
	int cr_ = ctx_enter((ctx), &prev_);         \
	if (cr_) {                                  \
		return ctx_failure(cr_);            \
	}                                           \
	capi_status st_ = nccl_status(call);        \
	ctx_leave((ctx), prev_)

#define CAPI_WITH_CTX(ctx, call)        \
	do {                            \
		CAPI_IN_CTX(ctx, call); \
		return st_;             \
	} while (0)

// The creating calls also record the new communicator inside a group (the
// pointer exists before the group ends; split, shrink and grow write theirs
// later, and the Go side waits for those itself).
#define CAPI_WITH_CTX_TRACK(ctx, call, out)                       \
	do {                                                      \
		CAPI_IN_CTX(ctx, call);                           \
		repair_group_depth(st_.code);                     \
		if ((st_.code == 0 || st_.code == 7) && *(out)) { \
			group_track(*(out));                      \
		}                                                 \
		return st_;                                       \
	} while (0)

capi_status capi_ncclCommInitRankConfig(uintptr_t ctx, uintptr_t *comm, int nranks, const capi_unique_id *id, int rank,
					capi_config_v23203 *config) {
	typedef int (*fn_t)(void **, int, capi_unique_id, int, capi_config_v23203 *);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclCommInitRankConfig];
	if (!f) {
		return missing_nccl();
	}
	CAPI_WITH_CTX_TRACK(ctx, f((void **)comm, nranks, *id, rank, config), comm);
}

capi_status capi_ncclCommInitRankScalable(uintptr_t ctx, uintptr_t *comm, int nranks, int rank, int nids,
					  capi_unique_id *ids, capi_config_v23203 *config) {
	typedef int (*fn_t)(void **, int, int, int, capi_unique_id *, capi_config_v23203 *);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclCommInitRankScalable];
	if (!f) {
		return missing_nccl();
	}
	CAPI_WITH_CTX_TRACK(ctx, f((void **)comm, nranks, rank, nids, ids, config), comm);
}

capi_status capi_ncclCommGrow(uintptr_t ctx, uintptr_t comm, int nranks, const capi_unique_id *id, int rank,
			      uintptr_t *newcomm, capi_config_v23203 *config) {
	typedef int (*fn_t)(void *, int, const capi_unique_id *, int, void **, capi_config_v23203 *);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclCommGrow];
	if (!f) {
		return missing_nccl();
	}
	if (comm) {
		int g = gate_enter(CAPI_F_QUEUES, comm);
		if (g) {
			capi_status p = {g, NULL};
			return p;
		}
	}
	CAPI_WITH_CTX_TRACK(ctx, f((void *)comm, nranks, id, rank, (void **)newcomm, config), newcomm);
}

capi_status capi_ncclMemAlloc(uintptr_t ctx, uintptr_t *ptr, size_t size) {
	typedef int (*fn_t)(void **, size_t);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclMemAlloc];
	if (!f) {
		return missing_nccl();
	}
	CAPI_WITH_CTX(ctx, f((void **)ptr, size));
}

capi_status capi_bench_allreduce_loop(uintptr_t buf, size_t count, int datatype, uintptr_t comm, uintptr_t stream,
				      long iters) {
	typedef int (*fn_t)(const void *, void *, size_t, int, int, void *, void *);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclAllReduce];
	if (!f) {
		return missing_nccl();
	}
	for (long i = 0; i < iters; i++) {
		int r = f((const void *)buf, (void *)buf, count, datatype, 0, (void *)comm, (void *)stream);
		if (r) {
			return nccl_status(r);
		}
		capi_bench_after_call();
	}
	return nccl_status(0);
}

int capi_bench_floor(void) { return 0; }

// The benchmarks' C loops do one locked read-modify-write after each call
// when capi_bench_lock_each is set: what a Go call's return (the runtime's
// atomic status changes) and the binding's unlock do after the same call.
int capi_bench_lock_each;
static long capi_bench_sink;

void capi_bench_set_lock_each(int on) { capi_bench_lock_each = on; }

void capi_bench_after_call(void) {
	if (capi_bench_lock_each) {
		__atomic_fetch_add(&capi_bench_sink, 1, __ATOMIC_SEQ_CST);
	}
}

void *capi_nccl_fn(int i) { return (i >= 0 && i < CAPI_NCCL_SYM_COUNT) ? nccl_syms[i] : NULL; }

int capi_nccl_missing(void) { return nccl_handle ? CAPI_MISSING : CAPI_NOT_LOADED; }

capi_status capi_nccl_status(int code) { return nccl_status(code); }

int capi_gate(uintptr_t comm) { return gate_enter(0, comm); }

int capi_gate_queue(uintptr_t comm) { return gate_enter(CAPI_F_QUEUES, comm); }

// ---------------------------------------------------------------------------
// CUDA trampolines.

static int set_ctx(uintptr_t ctx) {
	if (!ctx) {
		return 0;
	}
	uintptr_t cur = 0;
	int r = CUDA_FN(cuCtxGetCurrent)((void **)&cur);
	if (r || cur == ctx) {
		return r;
	}
	return CUDA_FN(cuCtxSetCurrent)((void *)ctx);
}

// capi_ctx_swap makes ctx (0: none) the calling thread's current context
// and returns the one it replaces in *prev (benchmarks and tests).
int capi_ctx_swap(uintptr_t ctx, uintptr_t *prev) {
	capi_any_fn get = CUDA_FN(cuCtxGetCurrent), set = CUDA_FN(cuCtxSetCurrent);
	if (!get || !set) {
		return missing_cuda();
	}
	int r = ((int (*)(void **))get)((void **)prev);
	return r ? r : ((int (*)(void *))set)((void *)ctx);
}

// capi_wait_streams: see shim.h. One cgo crossing per slice instead of one
// per query, error check and yield: on a core shared with NCCL's proxy
// thread (ranks pinned one core each) every return to Go lets the Go
// runtime's own threads run there too.
int capi_wait_streams(int n, const uintptr_t *ctxs, const uintptr_t *streams, const uintptr_t *comms,
		      unsigned char *done, long long slice_ns, int *which, int *code) {
	capi_any_fn query = CUDA_FN(cuStreamQuery);
	if (!query) {
		*which = 0;
		*code = missing_cuda();
		return CAPI_WAIT_CUDA;
	}
	typedef int (*async_fn)(void *, int *);
	async_fn async = (async_fn)nccl_syms[CAPI_SYM_ncclCommGetAsyncError];
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uintptr_t cur = 0;
	for (;;) {
		int busy = 0;
		for (int i = 0; i < n; i++) {
			if (done[i]) {
				continue;
			}
			int r = 0;
			if (ctxs[i] && ctxs[i] != cur) {
				r = set_ctx(ctxs[i]);
				cur = r ? 0 : ctxs[i];
			}
			if (!r) {
				r = query((void *)streams[i]);
			}
			if (r == 0) {
				done[i] = 1;
				continue;
			}
			if (r != 600) { // CUDA_ERROR_NOT_READY
				*which = i;
				*code = r;
				return CAPI_WAIT_CUDA;
			}
			busy++;
			if (async && comms[i]) {
				int state = 0;
				int res = async((void *)comms[i], &state);
				if (res == 0 && state != 0 && state != 7) { // ncclInProgress
					res = state;
				}
				if (res != 0) {
					*which = i;
					*code = res;
					return CAPI_WAIT_NCCL;
				}
			}
		}
		if (!busy) {
			return CAPI_WAIT_DONE;
		}
		sched_yield();
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((long long)(t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) >= slice_ns) {
			return CAPI_WAIT_SLICE;
		}
	}
}

#define CAPI_TRAMP_CUDA(name, params, args)                           \
	int capi_##name(uintptr_t capi_ctx_, CAPI_UNPAREN params) {  \
		capi_any_fn f = CUDA_FN(name);                        \
		if (!f) {                                             \
			return missing_cuda();                        \
		}                                                     \
		int r = set_ctx(capi_ctx_);                           \
		if (r) {                                              \
			return r;                                     \
		}                                                     \
		return f args;                                        \
	}
CAPI_CUDA_FUNCS(CAPI_TRAMP_CUDA)
#undef CAPI_TRAMP_CUDA

int capi_cuCtxSynchronize(uintptr_t ctx) {
	capi_any_fn f = CUDA_FN(cuCtxSynchronize);
	if (!f) {
		return missing_cuda();
	}
	int r = set_ctx(ctx);
	return r ? r : f();
}

int capi_cuInit(void) {
	capi_any_fn f = CUDA_FN(cuInit);
	if (!f) {
		return missing_cuda();
	}
	return f(0u);
}

int capi_cuGetErrorName(int code, const char **name) {
	capi_any_fn f = CUDA_FN(cuGetErrorName);
	if (!f) {
		return missing_cuda();
	}
	return f(code, name);
}

int capi_cuGetErrorString(int code, const char **text) {
	capi_any_fn f = CUDA_FN(cuGetErrorString);
	if (!f) {
		return missing_cuda();
	}
	return f(code, text);
}
