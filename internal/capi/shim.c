// nccl4go C shim: loading, symbol tables and trampolines. See shim.h.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

// The generic trampolines call through an unprototyped pointer: every
// argument they pass is already cast to the C type NCCL or CUDA declares
// (pointer, int, unsigned, size_t), so the System V calling convention passes
// it exactly as a prototyped call would. The package builds with -std=gnu11,
// where "()" still means "unspecified parameters".
typedef int (*capi_any_fn)();

// ---------------------------------------------------------------------------
// NCCL symbol table.

#define CAPI_NAME_NCCL(name, since, gate, params, args) #name,
#define CAPI_NAME_NCCL_SPECIAL(name, since) #name,
static const char *const nccl_names[CAPI_NCCL_SYM_COUNT] = {
	CAPI_NCCL_FUNCS(CAPI_NAME_NCCL) CAPI_NCCL_SPECIAL_FUNCS(CAPI_NAME_NCCL_SPECIAL)};

#define CAPI_SINCE_NCCL(name, since, gate, params, args) since,
#define CAPI_SINCE_NCCL_SPECIAL(name, since) since,
static const int nccl_since[CAPI_NCCL_SYM_COUNT] = {
	CAPI_NCCL_FUNCS(CAPI_SINCE_NCCL) CAPI_NCCL_SPECIAL_FUNCS(CAPI_SINCE_NCCL_SPECIAL)};

static void *nccl_handle;
static void *nccl_syms[CAPI_NCCL_SYM_COUNT];

int capi_nccl_sym_count(void) { return CAPI_NCCL_SYM_COUNT; }

const char *capi_nccl_sym_name(int i) { return (i >= 0 && i < CAPI_NCCL_SYM_COUNT) ? nccl_names[i] : NULL; }

int capi_nccl_sym_since(int i) { return (i >= 0 && i < CAPI_NCCL_SYM_COUNT) ? nccl_since[i] : 0; }

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

int capi_nccl_load(const char *path, char *err, size_t errlen) {
	if (nccl_handle) {
		set_err(err, errlen, "NCCL is already loaded");
		return -1;
	}
	void *h = open_lib(path, "ncclGetVersion", err, errlen);
	if (!h) {
		return -1;
	}
	for (int i = 0; i < CAPI_NCCL_SYM_COUNT; i++) {
		nccl_syms[i] = dlsym(h, nccl_names[i]);
	}
	nccl_handle = h;
	return 0;
}

int capi_nccl_loaded(void) { return nccl_handle != NULL; }

const char *capi_nccl_path(void) { return lib_path(nccl_syms[CAPI_SYM_ncclGetVersion]); }

void capi_nccl_unload(void) {
	if (nccl_handle) {
		memset(nccl_syms, 0, sizeof nccl_syms);
		dlclose(nccl_handle);
		nccl_handle = NULL;
	}
}

int capi_cuda_load(const char *path, char *err, size_t errlen) {
	if (cuda_handle) {
		set_err(err, errlen, "the CUDA driver is already loaded");
		return -1;
	}
	void *h = open_lib(path, "cuDriverGetVersion", err, errlen);
	if (!h) {
		return -1;
	}
	for (int i = 0; i < CAPI_CUDA_SYM_COUNT; i++) {
		cuda_syms[i] = dlsym(h, cuda_names[i]);
	}
	cuda_handle = h;
	return 0;
}

int capi_cuda_loaded(void) { return cuda_handle != NULL; }

const char *capi_cuda_path(void) { return lib_path(cuda_syms[CAPI_CU_cuDriverGetVersion]); }

// ---------------------------------------------------------------------------
// Status helpers.

static capi_status missing_nccl(void) {
	capi_status s = {nccl_handle ? CAPI_MISSING : CAPI_NOT_LOADED, NULL};
	return s;
}

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
// Group membership, per thread (NCCL's groups are per thread too).

static __thread int group_depth;
static __thread uintptr_t *group_comms;
static __thread int group_ncomms, group_cap;
// Bit i: level i+1 was opened by a manual GroupStart (capi_group_mark).
static __thread unsigned long long group_manual;

// Process-wide: how many threads' open groups hold work of each
// communicator (until capi_group_release after the outermost end).
// Destroy and Abort of a communicator some group holds would free what
// that group's end still uses.
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static struct held_entry {
	uintptr_t comm;
	int n;      // threads whose open group holds comm
	int orphan; // a thread ended with comm in its open group: NCCL can never run that work
} *held;
static int held_len, held_cap;
static int held_any; // held_len, read without the lock by the gate

// held_find returns comm's index in held, or held_len (held_mu held).
static int held_find(uintptr_t comm) {
	int i = 0;
	while (i < held_len && held[i].comm != comm) {
		i++;
	}
	return i;
}

static void held_add(uintptr_t comm, int delta) {
	pthread_mutex_lock(&held_mu);
	int i = held_find(comm);
	if (i == held_len && delta > 0) {
		if (held_len == held_cap) {
			int cap = held_cap ? 2 * held_cap : 16;
			struct held_entry *p = realloc(held, cap * sizeof *p);
			if (!p) {
				pthread_mutex_unlock(&held_mu);
				return;
			}
			held = p;
			held_cap = cap;
		}
		held[held_len].comm = comm;
		held[held_len].n = 0;
		held[held_len].orphan = 0;
		held_len++;
	}
	if (i < held_len) {
		held[i].n += delta;
		if (held[i].n <= 0 && !held[i].orphan) {
			held[i] = held[--held_len];
		}
	}
	__atomic_store_n(&held_any, held_len, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&held_mu);
}

// held_state returns how many open groups hold comm, and in *orphan
// whether a thread ended holding it.
static int held_state(uintptr_t comm, int *orphan) {
	int n = 0;
	*orphan = 0;
	pthread_mutex_lock(&held_mu);
	int i = held_find(comm);
	if (i < held_len) {
		n = held[i].n;
		*orphan = held[i].orphan;
	}
	pthread_mutex_unlock(&held_mu);
	return n;
}

int capi_group_held(uintptr_t comm) {
	int orphan;
	return held_state(comm, &orphan);
}

int capi_group_orphaned(uintptr_t comm) {
	int orphan;
	held_state(comm, &orphan);
	return orphan;
}

int capi_group_records(void) { return __atomic_load_n(&held_any, __ATOMIC_RELAXED); }

void capi_group_forget(uintptr_t comm) {
	pthread_mutex_lock(&held_mu);
	int i = held_find(comm);
	if (i < held_len) {
		held[i] = held[--held_len];
	}
	__atomic_store_n(&held_any, held_len, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&held_mu);
}

// A thread that ends with a group open (a goroutine that exits after
// GroupStart, which locked it to the thread) releases its holds here.
// Its communicators stay linked in NCCL's group state of a thread that no
// longer exists: they are marked orphaned, and refuse new work; they can
// still be aborted or destroyed (capi_group_forget then drops the mark).
static pthread_key_t group_key;
static int group_key_ok;
static pthread_once_t group_key_once = PTHREAD_ONCE_INIT;

static void group_thread_exit(void *unused) {
	(void)unused;
	pthread_mutex_lock(&held_mu);
	for (int i = 0; i < group_ncomms; i++) {
		int j = held_find(group_comms[i]);
		if (j < held_len) {
			held[j].orphan = 1;
			held[j].n--;
		}
	}
	pthread_mutex_unlock(&held_mu);
	group_ncomms = 0;
	free(group_comms);
	group_comms = NULL;
	group_cap = 0;
}

static void group_key_init(void) { group_key_ok = pthread_key_create(&group_key, group_thread_exit) == 0; }

// group_holds reports whether the calling thread's open group holds comm.
static int group_holds(uintptr_t comm) {
	for (int i = 0; i < group_ncomms; i++) {
		if (group_comms[i] == comm) {
			return 1;
		}
	}
	return 0;
}

static void group_track(uintptr_t comm) {
	if (group_holds(comm)) {
		return;
	}
	if (group_ncomms == group_cap) {
		int cap = group_cap ? 2 * group_cap : 16;
		uintptr_t *p = realloc(group_comms, cap * sizeof *p);
		if (!p) {
			return; // the Go side then waits for nothing it cannot name
		}
		if (!group_comms) {
			pthread_once(&group_key_once, group_key_init);
			if (group_key_ok) {
				pthread_setspecific(group_key, (void *)1); // run group_thread_exit at exit
			}
		}
		group_comms = p;
		group_cap = cap;
	}
	group_comms[group_ncomms++] = comm;
	held_add(comm, 1);
}

int capi_group_depth(void) { return group_depth; }

void capi_group_mark(void) {
	if (group_depth > 0 && group_depth <= 64) {
		group_manual |= 1ULL << (group_depth - 1);
	}
}

int capi_group_inner_manual(void) {
	if (group_depth <= 0) {
		return 0;
	}
	if (group_depth > 64) {
		return 1; // not tracked so deep: let it through
	}
	return (group_manual >> (group_depth - 1)) & 1;
}

int capi_group_take(uintptr_t *out, int max) {
	int n = group_ncomms;
	for (int i = 0; i < n && i < max; i++) {
		out[i] = group_comms[i];
	}
	if (n <= max) {
		group_ncomms = 0;
	}
	return n;
}

void capi_group_release(const uintptr_t *comms, int n) {
	for (int i = 0; i < n; i++) {
		held_add(comms[i], -1);
	}
}

// group_account follows ncclGroupStart/End: NCCL counts the depth even when
// ncclGroupEnd fails, so the shim does too.
static void group_account(int sym, int code) {
	if (sym == CAPI_SYM_ncclGroupStart && code == 0) {
		group_depth++;
		if (group_depth <= 64) {
			group_manual &= ~(1ULL << (group_depth - 1));
		}
	} else if ((sym == CAPI_SYM_ncclGroupEnd || sym == CAPI_SYM_ncclGroupSimulateEnd) && group_depth > 0) {
		group_depth--;
	}
}

// How many communicators that NCCL runs non-blocking are alive. Only they
// can be left with an operation in progress, so while there are none the
// gate skips its ncclCommGetAsyncError (about a third of the binding's cost
// per collective).
static int nonblocking_live;

void capi_nonblocking_add(int delta) { __atomic_add_fetch(&nonblocking_live, delta, __ATOMIC_RELAXED); }

// queues_work lists the calls that add work to a communicator's queue
// (collectives, point-to-point, and the calls whose outputs NCCL writes at
// the end of the group), which belongs to one group at a time. Inside a
// group, only they record their communicator in the thread's group.
static int queues_work(int sym) {
	switch (sym) {
	case CAPI_SYM_ncclAllReduce:
	case CAPI_SYM_ncclBroadcast:
	case CAPI_SYM_ncclReduce:
	case CAPI_SYM_ncclAllGather:
	case CAPI_SYM_ncclReduceScatter:
	case CAPI_SYM_ncclAlltoAll:
	case CAPI_SYM_ncclGather:
	case CAPI_SYM_ncclScatter:
	case CAPI_SYM_ncclSend:
	case CAPI_SYM_ncclRecv:
	case CAPI_SYM_ncclPutSignal:
	case CAPI_SYM_ncclSignal:
	case CAPI_SYM_ncclWaitSignal:
	case CAPI_SYM_ncclCommSplit:
	case CAPI_SYM_ncclCommShrink:
	case CAPI_SYM_ncclCommGrow:
	case CAPI_SYM_ncclCommWindowRegister:
	case CAPI_SYM_ncclDevCommCreate:
	case CAPI_SYM_ncclCommFinalize:
	case CAPI_SYM_ncclCommDestroy:
		return 1;
	}
	return 0;
}

// gate_check runs before a call sym on comm. It returns CAPI_PENDING while
// comm's previous operation is in progress, and CAPI_HELD when sym would
// queue work on comm while another thread's open group holds comm's queue;
// else 0, and inside a group a call that queues work records comm. The
// calls on one communicator are serialized (the Go side's lock), so the
// check and the record are atomic for comm.
static int gate_check(int sym, uintptr_t comm) {
	if (!comm) {
		return 0;
	}
	int queues = queues_work(sym);
	if (queues && __atomic_load_n(&held_any, __ATOMIC_RELAXED) > 0 && !group_holds(comm)) {
		int orphan, n = held_state(comm, &orphan);
		if (orphan) {
			return CAPI_ORPHANED;
		}
		if (n > 0) {
			return CAPI_HELD;
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
	if (queues && group_depth > 0) {
		group_track(comm);
	}
	return 0;
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
	if (code == 0 || code == 7 || group_depth > 0) {
		return;
	}
	capi_any_fn end = (capi_any_fn)nccl_syms[CAPI_SYM_ncclGroupEnd];
	if (end) {
		end();
	}
}

// leaks_group_depth lists the generic calls with such early returns.
static int leaks_group_depth(int sym) { return sym == CAPI_SYM_ncclCommDestroy || sym == CAPI_SYM_ncclCommAbort; }

// ---------------------------------------------------------------------------
// Generic NCCL trampolines.

#define CAPI_TRAMP_NCCL(name, since, gate, params, args)                        \
	capi_status capi_##name params {                                        \
		capi_any_fn f = (capi_any_fn)nccl_syms[CAPI_SYM_##name];        \
		if (!f) {                                                       \
			return missing_nccl();                                  \
		}                                                               \
		int g_ = gate_check(CAPI_SYM_##name, (uintptr_t)(gate));       \
		if (g_) {                                                       \
			capi_status p = {g_, NULL};                             \
			return p;                                               \
		}                                                               \
		capi_status s = nccl_status(f args);                            \
		group_account(CAPI_SYM_##name, s.code);                         \
		if (leaks_group_depth(CAPI_SYM_##name)) {                       \
			repair_group_depth(s.code);                             \
		}                                                               \
		return s;                                                       \
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

#define CAPI_WITH_CTX(ctx, call)                        \
	do {                                            \
		uintptr_t prev_;                        \
		int cr_ = ctx_enter((ctx), &prev_);     \
		if (cr_) {                              \
			return ctx_failure(cr_);        \
		}                                       \
		capi_status st_ = nccl_status(call);    \
		ctx_leave((ctx), prev_);                \
		return st_;                             \
	} while (0)

// The creating calls also record the new communicator inside a group (the
// pointer exists before the group ends; split, shrink and grow write theirs
// later, and the Go side waits for those itself).
#define CAPI_WITH_CTX_TRACK(ctx, call, out)                                     \
	do {                                                                    \
		uintptr_t prev_;                                                \
		int cr_ = ctx_enter((ctx), &prev_);                             \
		if (cr_) {                                                      \
			return ctx_failure(cr_);                                \
		}                                                               \
		capi_status st_ = nccl_status(call);                            \
		ctx_leave((ctx), prev_);                                        \
		repair_group_depth(st_.code);                                   \
		if (group_depth > 0 && (st_.code == 0 || st_.code == 7) && *(out)) { \
			group_track(*(out));                                    \
		}                                                               \
		return st_;                                                     \
	} while (0)

capi_status capi_ncclCommInitRankConfig(uintptr_t ctx, uintptr_t *comm, int nranks, const capi_unique_id *id, int rank,
					capi_config_v23007 *config) {
	typedef int (*fn_t)(void **, int, capi_unique_id, int, capi_config_v23007 *);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclCommInitRankConfig];
	if (!f) {
		return missing_nccl();
	}
	CAPI_WITH_CTX_TRACK(ctx, f((void **)comm, nranks, *id, rank, config), comm);
}

capi_status capi_ncclCommInitRankScalable(uintptr_t ctx, uintptr_t *comm, int nranks, int rank, int nids,
					  capi_unique_id *ids, capi_config_v23007 *config) {
	typedef int (*fn_t)(void **, int, int, int, capi_unique_id *, capi_config_v23007 *);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclCommInitRankScalable];
	if (!f) {
		return missing_nccl();
	}
	CAPI_WITH_CTX_TRACK(ctx, f((void **)comm, nranks, rank, nids, ids, config), comm);
}

capi_status capi_ncclCommGrow(uintptr_t ctx, uintptr_t comm, int nranks, const capi_unique_id *id, int rank,
			      uintptr_t *newcomm, capi_config_v23007 *config) {
	typedef int (*fn_t)(void *, int, const capi_unique_id *, int, void **, capi_config_v23007 *);
	fn_t f = (fn_t)nccl_syms[CAPI_SYM_ncclCommGrow];
	if (!f) {
		return missing_nccl();
	}
	int g = gate_check(CAPI_SYM_ncclCommGrow, comm);
	if (g) {
		capi_status p = {g, NULL};
		return p;
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
	}
	return nccl_status(0);
}

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

#define CAPI_TRAMP_CUDA(name, params, args)                           \
	int capi_##name(uintptr_t capi_ctx_, CAPI_UNPAREN params) {  \
		capi_any_fn f = CUDA_FN(name);                        \
		if (!f) {                                             \
			return cuda_handle ? CAPI_MISSING : CAPI_NOT_LOADED; \
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
		return cuda_handle ? CAPI_MISSING : CAPI_NOT_LOADED;
	}
	int r = set_ctx(ctx);
	return r ? r : f();
}

int capi_cuInit(void) {
	capi_any_fn f = CUDA_FN(cuInit);
	if (!f) {
		return cuda_handle ? CAPI_MISSING : CAPI_NOT_LOADED;
	}
	return f(0u);
}

int capi_cuGetErrorName(int code, const char **name) {
	capi_any_fn f = CUDA_FN(cuGetErrorName);
	if (!f) {
		return cuda_handle ? CAPI_MISSING : CAPI_NOT_LOADED;
	}
	return f(code, name);
}

int capi_cuGetErrorString(int code, const char **text) {
	capi_any_fn f = CUDA_FN(cuGetErrorString);
	if (!f) {
		return cuda_handle ? CAPI_MISSING : CAPI_NOT_LOADED;
	}
	return f(code, text);
}
