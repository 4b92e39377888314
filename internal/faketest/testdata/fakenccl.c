// fakenccl.c: a fake NCCL (libnccl.so.2) for nccl4go's CPU-only tests.
//
// It exports every function of the shim's lists (CAPI_NCCL_FUNCS and
// CAPI_NCCL_SPECIAL_FUNCS in internal/capi/shim.h), each only when
// FAKE_RELEASE (MMmmpp, set with -D) is at least the release that first has
// it, so that a build for 2.28.3 lacks every 2.29+ symbol as the real
// library does. Behaviour that changed between releases follows the version
// the library reports (FAKE_NCCL_VERSION, default FAKE_RELEASE), as described
// in NCCL's nccl.h and source of each release: argument checks and
// result codes, ncclConfig_t parsing, the non-blocking (ncclInProgress)
// protocol, deferred outputs, and the versioned device-API structs.
//
// Communicators live in this process only: a rank never waits for its
// peers, whose existence is assumed. With one rank, collectives move the
// data (device memory of the fake CUDA driver is host memory); with more,
// they check their arguments and move nothing. Send and receive to self are
// matched at the end of a group. Every message of ncclGetLastError reads
// "fake: <function>: <reason>".
//
// Knobs (environment, read once):
//   FAKE_NCCL_VERSION      what ncclGetVersion reports (default FAKE_RELEASE)
//   FAKE_NCCL_POLLS        an operation in progress on a non-blocking
//                          communicator stays ncclInProgress for this many
//                          ncclCommGetAsyncError polls (default 0: the first
//                          poll completes it)
//   FAKE_NCCL_HANG         1: operations in progress never complete (until
//                          abort); or a comma list of the functions that hang.
//                          Only non-blocking communicators have operations in
//                          progress: a blocking call of real NCCL that hangs
//                          never returns, which no test can use, so the fake
//                          completes blocking calls at once.
//   FAKE_NCCL_FAIL         name=code[@n][,...]: the function returns code
//                          (on every call, or only on its n-th call); inside
//                          a group the group's end fails too
//   FAKE_NCCL_ASYNC_FAIL   code: initialization completes with this result
//                          instead of ncclSuccess; or name=code[,...] for the
//                          completion of other functions
//   FAKE_NCCL_ASYNC_EARLY  n: an operation that completes with an error
//                          (FAKE_NCCL_ASYNC_FAIL) shows the error n polls
//                          before its job ends and stores its outputs (a
//                          Split or Shrink child), as an NCCL job still
//                          running when the communicator broke (a peer
//                          failed) stores the child later
//   FAKE_NCCL_COLL_POLLS   n: collectives and point-to-point calls on a
//                          non-blocking communicator return ncclInProgress and
//                          complete after n polls, as real NCCL does for
//                          communicators of several ranks (unset: they
//                          complete at once, as real NCCL does for one rank)
//   FAKE_NCCL_SPLIT_NRANKS size of a ncclCommSplit child (default the parent's)
//   FAKE_NCCL_NVML_DEV     nvmlDev of every communicator (default cudaDev+1)
//   FAKE_NCCL_GIN_TYPE, FAKE_NCCL_RAILED_GIN_TYPE, FAKE_NCCL_HOST_RMA,
//   FAKE_NCCL_LSA_TEAMS (default 1), FAKE_NCCL_MULTIMEM,
//   FAKE_NCCL_GIN_CONNECTION (2.31's ginConnectionType): property values
//   FAKE_NCCL_DEVR_FAIL    1: the lazy device-runtime init fails: ncclTeamLsa,
//                          ncclTeamRail and the CFT teams return an all-zero
//                          team and ncclTeamRankToLsa -1, as NCCL does
//   FAKE_NCCL_CFT          1: the GPUs have CUDA fabric logical endpoints
//                          (CFT: Blackwell, CUDA 13.3): the CFT teams are the
//                          LSA team and the logical-endpoint queries answer;
//                          0 (default): no CFT, as on every GPU before
//                          Blackwell (NVIDIA's 2.31.2 cft_dev_runtime.cc)
//   FAKE_NCCL_PARAMS       more parameters for the registry of the parameter
//                          API (2.30.3), as later releases register more:
//                          KEY:type[:private]=default,... with type one of
//                          i8 i16 i32 i64 u8 u16 u32 u64 bool str
//   FAKE_NCCL_NO_WINDOW    1: no symmetric memory (window registration
//                          succeeds without a window)
//   FAKE_NCCL_NO_SYMMETRIC 1: ncclDevCommCreate fails with ncclInvalidUsage
//                          (as it does with NCCL_WIN_ENABLE=0,
//                          NCCL_CUMEM_ENABLE=0, and before 2.28.7 for a
//                          communicator of one rank)
//   FAKE_NCCL_LOG          path: append the name of every call, one a line,
//                          and what some calls read: "config ..." (an
//                          ncclConfig_t), "collconfig ..." (an
//                          ncclCollConfig_t), "window ... flags=..."
//   FAKE_NCCL_INIT_DELAY_MS n: the init family sleeps n ms first (a blocking
//                          init that waits for its peers)
//   FAKE_NCCL_FINALIZE_WAITS_PEERS 1: a blocking ncclCommFinalize of a rank
//                          whose communicator has other live ranks in this
//                          process (made by one ncclCommInitAll, or by
//                          ncclCommInitRank* with one unique id) waits until
//                          each of them has called ncclCommFinalize, as
//                          2.31.0a16 was measured to (two ranks of one
//                          process on one GPU: finalizing them one after the
//                          other from one thread hung); the ranks finalized
//                          inside one group count together at its end. 0:
//                          it never waits (2.30.7 and earlier, measured).
//                          Default: on when the reported version is 2.31.0
//                          or later. Split and Shrink children are not
//                          modelled (they never wait)
//   FAKE_NCCL_FINALIZE_WAIT_MS n: how long that wait lasts before the fake
//                          gives up and fails with ncclInvalidUsage, saying
//                          that real NCCL would have hung (default 10000)
// and NCCL's own NCCL_COMM_BLOCKING, NCCL_ENABLE_VERSION_CHECK,
// NCCL_MULTI_RANK_GPU_ENABLE, NCCL_LOCAL_REGISTER, NCCL_WIN_ENABLE,
// NCCL_CUMEM_ENABLE and NCCL_COMM_ID.
//
// The fake CUDA driver (fakecuda.c) provides the devices and memory; this
// library finds it with dlopen(NCCL4GO_CUDA_LIBRARY, RTLD_NOLOAD).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef FAKE_RELEASE
#define FAKE_RELEASE 23007
#endif
#define SINCE(v) (FAKE_RELEASE >= (v))

#define EXPORT __attribute__((visibility("default")))
// Helpers some release variants do not use.
#define HELPER static __attribute__((unused))

enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclTimeout = 8,
};

enum { NUM_OPS = 5, SPLIT_NOCOLOR = -1, UNDEF = INT_MIN };
#define API_MAGIC 0xcafebeefu // NCCL_API_MAGIC
#define SIM_MAGIC 0x74685283u // the magic of ncclSimInfo_t
enum { WIN_COLL_SYMMETRIC = 1, WIN_ALIGNMENT = 4096, SUSPEND_MEM = 1 };

typedef struct {
	char internal[128];
} ncclUniqueId;

static const int type_size[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

// ---------------------------------------------------------------------------
// Knobs, read once.

static struct {
	int version;
	int polls;
	int hang_all;
	char hang[1024];
	int coll_polls; // -1: unset
	int split_nranks;
	int nvml_dev; // -1: cudaDev+1
	int gin_type, railed_gin_type, host_rma, lsa_teams, multimem;
	int gin_conn;  // ncclCommProperties_t.ginConnectionType (2.31)
	int devr_fail; // the lazy device-runtime init fails
	int cft;       // CUDA fabric logical endpoints (FAKE_NCCL_CFT)
	int no_window, no_symmetric;
	int win_disabled, cumem_disabled; // NCCL_WIN_ENABLE=0, NCCL_CUMEM_ENABLE=0
	int log_fd;
	int async_fail_init;
	char async_fail[1024];
	int init_delay_ms;
	int async_early;
	int finalize_waits;   // FAKE_NCCL_FINALIZE_WAITS_PEERS
	int finalize_wait_ms; // FAKE_NCCL_FINALIZE_WAIT_MS
} knob;

struct fail_rule {
	char name[64];
	int code;
	int nth; // 0: every call
	int calls;
};

static struct fail_rule fail_rules[32];
static int nfail_rules;

static pthread_mutex_t mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int env_int(const char *name, int def) {
	const char *s = getenv(name);
	return (s && *s) ? atoi(s) : def;
}

static void copy_env(char *dst, size_t n, const char *name) {
	const char *s = getenv(name);
	snprintf(dst, n, "%s", s ? s : "");
}

static void read_knobs(void) {
	knob.version = env_int("FAKE_NCCL_VERSION", FAKE_RELEASE);
	knob.polls = env_int("FAKE_NCCL_POLLS", 0);
	knob.init_delay_ms = env_int("FAKE_NCCL_INIT_DELAY_MS", 0);
	knob.async_early = env_int("FAKE_NCCL_ASYNC_EARLY", 0);
	knob.finalize_waits = env_int("FAKE_NCCL_FINALIZE_WAITS_PEERS", knob.version >= 23100);
	knob.finalize_wait_ms = env_int("FAKE_NCCL_FINALIZE_WAIT_MS", 10000);
	copy_env(knob.hang, sizeof knob.hang, "FAKE_NCCL_HANG");
	knob.hang_all = strcmp(knob.hang, "1") == 0;
	knob.coll_polls = env_int("FAKE_NCCL_COLL_POLLS", -1);
	knob.split_nranks = env_int("FAKE_NCCL_SPLIT_NRANKS", 0);
	knob.nvml_dev = env_int("FAKE_NCCL_NVML_DEV", -1);
	knob.gin_type = env_int("FAKE_NCCL_GIN_TYPE", 0);
	knob.railed_gin_type = env_int("FAKE_NCCL_RAILED_GIN_TYPE", 0);
	knob.host_rma = env_int("FAKE_NCCL_HOST_RMA", 0);
	knob.lsa_teams = env_int("FAKE_NCCL_LSA_TEAMS", 1);
	knob.multimem = env_int("FAKE_NCCL_MULTIMEM", 0);
	knob.gin_conn = env_int("FAKE_NCCL_GIN_CONNECTION", 0);
	knob.devr_fail = env_int("FAKE_NCCL_DEVR_FAIL", 0);
	knob.cft = env_int("FAKE_NCCL_CFT", 0);
	knob.no_window = env_int("FAKE_NCCL_NO_WINDOW", 0) || env_int("NCCL_WIN_ENABLE", 1) == 0;
	knob.no_symmetric = env_int("FAKE_NCCL_NO_SYMMETRIC", 0);
	knob.win_disabled = env_int("NCCL_WIN_ENABLE", 1) == 0;
	knob.cumem_disabled = env_int("NCCL_CUMEM_ENABLE", 1) == 0;
	const char *log = getenv("FAKE_NCCL_LOG");
	knob.log_fd = (log && *log) ? open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
	copy_env(knob.async_fail, sizeof knob.async_fail, "FAKE_NCCL_ASYNC_FAIL");
	if (knob.async_fail[0] && !strchr(knob.async_fail, '=')) {
		knob.async_fail_init = atoi(knob.async_fail);
		knob.async_fail[0] = 0;
	}
	// FAKE_NCCL_FAIL=name=code[@n],...
	char buf[1024];
	copy_env(buf, sizeof buf, "FAKE_NCCL_FAIL");
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok && nfail_rules < 32; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			continue;
		}
		*eq = 0;
		struct fail_rule *r = &fail_rules[nfail_rules++];
		snprintf(r->name, sizeof r->name, "%s", tok);
		r->code = atoi(eq + 1);
		char *at = strchr(eq + 1, '@');
		r->nth = at ? atoi(at + 1) : 0;
	}
}

static int version(void) { return knob.version; }

// in_list reports whether name is an element of the comma list.
static int in_list(const char *list, const char *name) {
	size_t n = strlen(name);
	for (const char *p = list; (p = strstr(p, name)) != NULL; p += n) {
		if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',' || p[n] == '=')) {
			return 1;
		}
	}
	return 0;
}

// async_fail is the result an operation of function name completes with.
static int async_fail(const char *name) {
	if (strncmp(name, "ncclCommInit", 12) == 0 && knob.async_fail_init) {
		return knob.async_fail_init;
	}
	size_t n = strlen(name);
	for (const char *p = knob.async_fail; (p = strstr(p, name)) != NULL; p += n) {
		if ((p == knob.async_fail || p[-1] == ',') && p[n] == '=') {
			return atoi(p + n + 1);
		}
	}
	return ncclSuccess;
}

// ---------------------------------------------------------------------------
// The last error (one process-wide buffer, as in NCCL) and the call log.

static char last_error[1024];

// fail records "fake: fn: reason" as the last error and returns code.
static int fail(int code, const char *fn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(int code, const char *fn, const char *fmt, ...) {
	char reason[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof reason, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&mu);
	snprintf(last_error, sizeof last_error, "fake: %s: %s", fn, reason);
	pthread_mutex_unlock(&mu);
	return code;
}

// log_write writes k bytes of line (at most size - 1: what snprintf
// would have written) to FAKE_NCCL_LOG, best effort.
static void log_write(const char *line, int k, size_t size) {
	if (k > (int)size - 1) {
		k = (int)size - 1;
	}
	if (knob.log_fd >= 0 && k > 0 && write(knob.log_fd, line, (size_t)k) < 0) {
		// nothing to do: the log is best effort
	}
}

// log_line writes one printf-formatted line (at most 511 bytes) to
// FAKE_NCCL_LOG.
__attribute__((format(printf, 1, 2))) static void log_line(const char *fmt, ...) {
	if (knob.log_fd < 0) {
		return;
	}
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	log_write(line, k, sizeof line);
}

static void trace(const char *fn) { log_line("%s\n", fn); }

// injected returns the code FAKE_NCCL_FAIL makes fn return, or 0.
static int injected(const char *fn) {
	int code = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nfail_rules; i++) {
		struct fail_rule *r = &fail_rules[i];
		if (strcmp(r->name, fn) == 0) {
			r->calls++;
			if (r->nth == 0 || r->nth == r->calls) {
				code = r->code;
			}
		}
	}
	pthread_mutex_unlock(&mu);
	if (code) {
		fail(code, fn, "injected failure (FAKE_NCCL_FAIL)");
	}
	return code;
}

// ENTER starts every exported function: read the knobs, log the call, and
// fail as FAKE_NCCL_FAIL says.
#define ENTER(fn)                                       \
	pthread_once(&once, read_knobs);                \
	trace(fn);                                      \
	do {                                            \
		int inj_ = injected(fn);                \
		if (inj_) {                             \
			return group_error_check(inj_); \
		}                                       \
	} while (0)

// ---------------------------------------------------------------------------
// The fake CUDA driver, found in the process.

static void *cuda_sym(const char *name) {
	static void *handle;
	pthread_mutex_lock(&mu);
	if (!handle) {
		const char *path = getenv("NCCL4GO_CUDA_LIBRARY");
		if (path && *path) {
			handle = dlopen(path, RTLD_NOLOAD | RTLD_NOW);
		}
	}
	void *h = handle;
	pthread_mutex_unlock(&mu);
	return h ? dlsym(h, name) : NULL;
}

#define CUDA_CALL(ret, name, params, args, missing)                      \
	HELPER ret cu_##name params {                                    \
		ret(*f) params = (ret(*) params)cuda_sym(#name);         \
		return f ? f args : (missing);                           \
	}
CUDA_CALL(int, fakecuda_current_device, (void), (), -3)
CUDA_CALL(int, fakecuda_compute_capability, (void), (), 90)
CUDA_CALL(int, fakecuda_memory, (uintptr_t p, size_t n, int *dev, int *vmm, uintptr_t *base, size_t *size),
	  (p, n, dev, vmm, base, size), 0)
CUDA_CALL(int, fakecuda_stream_device, (void *s), (s), s ? -2 : -1)
CUDA_CALL(int, fakecuda_alloc, (uintptr_t * p, size_t n, size_t align), (p, n, align), 3)
CUDA_CALL(int, fakecuda_free, (uintptr_t p), (p), 3)
CUDA_CALL(int, cuDeviceGetCount, (int *n), (n), 3)
CUDA_CALL(int, cuDriverGetVersion, (int *v), (v), 3)

// current_device is the calling thread's CUDA device, or fails.
static int current_device(const char *fn, int *dev) {
	int d = cu_fakecuda_current_device();
	if (d == -3) {
		return fail(ncclUnhandledCudaError, fn, "the fake CUDA driver is not loaded (NCCL4GO_CUDA_LIBRARY)");
	}
	if (d < 0) {
		return fail(ncclUnhandledCudaError, fn, "cudaGetDevice: no CUDA context is current on this thread");
	}
	*dev = d;
	return ncclSuccess;
}

// ---------------------------------------------------------------------------
// Element types, for PreMulSum.

static float half_to_float(uint16_t h) {
	int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
	float v;
	if (e == 0) {
		v = ldexpf((float)m, -24);
	} else if (e == 31) {
		v = m ? NAN : INFINITY;
	} else {
		v = ldexpf((float)(m | 1024), e - 25);
	}
	return s ? -v : v;
}

static uint16_t float_to_half(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	if (isnan(f)) {
		return sign | 0x7e00;
	}
	float a = fabsf(f);
	if (a >= 65520.0f) {
		return sign | 0x7c00;
	}
	if (a < ldexpf(1, -14)) { // subnormal: units of 2^-24, ties to even
		return sign | (uint16_t)nearbyintf(a * ldexpf(1, 24));
	}
	int e;
	float m = frexpf(a, &e); // a = m * 2^e, m in [0.5, 1)
	uint32_t mant = (uint32_t)nearbyintf(m * 2048.0f); // 11 bits with the implicit one
	if (mant == 2048) {
		mant = 1024;
		e++;
	}
	return sign | (uint16_t)((e + 14) << 10) | (uint16_t)(mant & 1023);
}

static float bf16_to_float(uint16_t b) {
	uint32_t x = (uint32_t)b << 16;
	float f;
	memcpy(&f, &x, 4);
	return f;
}

static uint16_t float_to_bf16(float f) {
	uint32_t x;
	memcpy(&x, &f, 4);
	if (isnan(f)) {
		return (uint16_t)((x >> 16) | 0x40);
	}
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

// fp8: E4M3 ("fn": no infinities, max 448) and E5M2 (IEEE-like).
static float fp8_to_float(uint8_t c, int e5m2) {
	int ebits = e5m2 ? 5 : 4, mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
	int s = c >> 7, e = (c >> mbits) & ((1 << ebits) - 1), m = c & ((1 << mbits) - 1);
	float v;
	if (e5m2 && e == 31) {
		v = m ? NAN : INFINITY;
	} else if (!e5m2 && e == 15 && m == 7) {
		v = NAN;
	} else if (e == 0) {
		v = ldexpf((float)m, 1 - bias - mbits);
	} else {
		v = ldexpf(1.0f + (float)m / (float)(1 << mbits), e - bias);
	}
	return s ? -v : v;
}

// float_to_fp8 rounds to the nearest code (ties to even), saturating.
static uint8_t float_to_fp8(float f, int e5m2) {
	if (isnan(f)) {
		return 0x7f;
	}
	uint8_t sign = signbit(f) ? 0x80 : 0;
	float a = fabsf(f);
	if (e5m2 && isinf(a)) {
		return sign | 0x7c;
	}
	int best = 0;
	float bestd = INFINITY;
	for (int c = 0; c < 128; c++) {
		float v = fp8_to_float((uint8_t)c, e5m2);
		if (isnan(v) || isinf(v)) {
			break;
		}
		float d = fabsf(v - a);
		if (d < bestd || (d == bestd && (c & 1) == 0)) {
			best = c;
			bestd = d;
		}
	}
	return sign | (uint8_t)best;
}

// scale multiplies n elements of type dt at src by scalar (given in the
// element type, as NCCL takes it) into dst.
static void scale(void *dst, const void *src, size_t n, int dt, const void *scalar) {
	for (size_t i = 0; i < n; i++) {
		switch (dt) {
		case 0: ((int8_t *)dst)[i] = (int8_t)(((const int8_t *)src)[i] * *(const int8_t *)scalar); break;
		case 1: ((uint8_t *)dst)[i] = (uint8_t)(((const uint8_t *)src)[i] * *(const uint8_t *)scalar); break;
		case 2: ((int32_t *)dst)[i] = (int32_t)((uint32_t)((const int32_t *)src)[i] * (uint32_t) * (const int32_t *)scalar); break;
		case 3: ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i] * *(const uint32_t *)scalar; break;
		case 4: ((int64_t *)dst)[i] = (int64_t)((uint64_t)((const int64_t *)src)[i] * (uint64_t) * (const int64_t *)scalar); break;
		case 5: ((uint64_t *)dst)[i] = ((const uint64_t *)src)[i] * *(const uint64_t *)scalar; break;
		case 6:
			((uint16_t *)dst)[i] = float_to_half(half_to_float(((const uint16_t *)src)[i]) *
							     half_to_float(*(const uint16_t *)scalar));
			break;
		case 7: ((float *)dst)[i] = ((const float *)src)[i] * *(const float *)scalar; break;
		case 8: ((double *)dst)[i] = ((const double *)src)[i] * *(const double *)scalar; break;
		case 9:
			((uint16_t *)dst)[i] = float_to_bf16(bf16_to_float(((const uint16_t *)src)[i]) *
							     bf16_to_float(*(const uint16_t *)scalar));
			break;
		case 10:
		case 11:
			((uint8_t *)dst)[i] = float_to_fp8(fp8_to_float(((const uint8_t *)src)[i], dt == 11) *
								   fp8_to_float(*(const uint8_t *)scalar, dt == 11),
							   dt == 11);
			break;
		}
	}
}

// ---------------------------------------------------------------------------
// Communicators.

// The config a communicator runs with (ncclConfig_t's fields).
struct config {
	int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char *netName;
	int splitShare, trafficClass;
	const char *commName;
	int collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs, nChannelsPerNetPeer, nvlinkCentricSched;
	int graphUsageMode, numRmaCtx, maxP2pPeers, graphStreamOrdering;
	int launchOrderImplicit, numRmaSig, rmaEagerInit, hostCftMode, nvlsHostMode;
};

// ncclConfig_t as of 2.32.3 (120 bytes; 2.30.7's 96 plus launchOrderImplicit,
// numRmaSig, rmaEagerInit (2.31), hostCftMode (2.31.2), nvlsHostMode
// (2.32.3)); a library reads the prefix of its own release (config_size).
struct raw_config {
	size_t size;
	unsigned int magic, version;
	int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char *netName;
	int splitShare, trafficClass;
	const char *commName;
	int collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs, nChannelsPerNetPeer, nvlinkCentricSched;
	int graphUsageMode, numRmaCtx, maxP2pPeers, graphStreamOrdering;
	int launchOrderImplicit, numRmaSig, rmaEagerInit, hostCftMode, nvlsHostMode;
};

struct redop {
	int alive;
	int datatype;
	int residence; // 0: device pointer, 1: host immediate
	uint64_t scalar; // the value (host immediate) or the device address
};

struct reg {
	uintptr_t buff;
	size_t size;
	int alive;
	struct comm *comm;
	struct reg *next;
};

struct window {
	struct comm *comm;
	uintptr_t user;
	size_t size;
	int flags;
	int alive;
	struct window *next;
	size_t big_offset; // where the window starts in the communicator's symmetric range (NCCL's bigOffset)
};

struct devcomm {
	void *addr;
	int alive;
	struct comm *comm;
	struct devcomm *next;
};

// An action runs when the operation it belongs to completes: it writes an
// output NCCL writes late (a child communicator, a window, a device
// communicator).
struct action {
	enum { ACT_WRITE_PTR, ACT_WRITE_BYTES, ACT_SET_STATE } kind;
	void **out;   // ACT_WRITE_PTR: *out = ptr
	void *ptr;    // ACT_SET_STATE: ((struct comm *)ptr)->state = result
	int result;
	void *dst;    // ACT_WRITE_BYTES: memcpy(dst, bytes, n)
	unsigned char bytes[256];
	size_t n;
	int child;    // ACT_WRITE_PTR of a Split/Shrink child: never delivered, NCCL frees it
	struct action *next;
};

struct comm {
	uint64_t magic; // COMM_MAGIC while alive
	int nranks, rank, cudaDev;
	struct config config;
	// The asynchronous state (ncclCommGetAsyncError): ncclSuccess, an
	// error, or ncclInProgress while an operation runs; then polls counts
	// the polls left before it completes with pending_result and its
	// actions run.
	int state;
	int polls;
	int hang;
	int pending_result;
	struct action *actions;
	int late; // polls left before the actions of a job that failed early run
	int dead; // destroyed or aborted
	int finalized, revoked, suspended, shares_memory;
	// The ranks of one communicator made in this process share a clique
	// (0: none known); fin_arrived: this rank's ncclCommFinalize took
	// effect (at the call, or at the end of the group it was issued in).
	uint64_t clique;
	int fin_arrived;
	struct redop *ops;
	int nops;
	struct reg *regs;
	struct window *windows;
	struct devcomm *devcomms;
	// CFT logical endpoints made (2.31.2): the unicast ones of the flat CFT
	// team, and the multicast one of the CFT multimem team.
	int le_uc, le_mc;
	struct comm *next; // every communicator ever made (never freed)
};

#define COMM_MAGIC 0x66616b65636f6d6dull // "fakecomm"

static struct comm *comms; // all communicators, live and dead
static int live_comms;      // communicators made and not yet destroyed or aborted

static void trace(const char *fn);

// trace_live logs "live=N" after a communicator is made or killed, so that
// tests can check that the binding leaves none behind (faketest.LiveComms).
static void trace_live(int n) {
	char line[32];
	snprintf(line, sizeof line, "live=%d", n);
	trace(line);
}

// lookup returns a communicator by handle, alive or dead, or NULL if the
// handle was never one (no memory behind a bad handle is read).
static struct comm *lookup(const void *h) {
	pthread_mutex_lock(&mu);
	struct comm *c = comms;
	while (c && (const void *)c != h) {
		c = c->next;
	}
	pthread_mutex_unlock(&mu);
	return c;
}

// comm_check is NCCL's CommCheck: a live communicator.
static int comm_check(const void *h, const char *fn, struct comm **out) {
	if (!h) {
		return fail(ncclInvalidArgument, fn, "comm argument is NULL");
	}
	struct comm *c = lookup(h);
	if (!c || c->dead) {
		return fail(ncclInvalidArgument, fn, "Error: corrupted comm object detected (%p is %s)", h,
			    c ? "destroyed" : "not a communicator");
	}
	*out = c;
	return ncclSuccess;
}

static struct comm *new_comm(int nranks, int rank, int dev, const struct config *cfg) {
	struct comm *c = calloc(1, sizeof *c);
	if (!c) {
		return NULL;
	}
	c->magic = COMM_MAGIC;
	c->nranks = nranks;
	c->rank = rank;
	c->cudaDev = dev;
	c->config = *cfg;
	pthread_mutex_lock(&mu);
	c->next = comms;
	comms = c;
	int live = __atomic_add_fetch(&live_comms, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&mu);
	trace_live(live);
	return c;
}

static void run_actions(struct action *a) {
	while (a) {
		struct action *next = a->next;
		if (a->kind == ACT_WRITE_PTR) {
			__atomic_store_n(a->out, a->ptr, __ATOMIC_RELEASE);
		} else if (a->kind == ACT_SET_STATE) {
			((struct comm *)a->ptr)->state = a->result;
		} else {
			memcpy(a->dst, a->bytes, a->n);
		}
		free(a);
		a = next;
	}
}

static void kill_child(struct comm *c);

// drop_actions discards actions that will never run. A Split or Shrink
// child whose job never ends is freed, as NCCL frees it when the job is
// aborted.
static void drop_actions(struct action *a) {
	while (a) {
		struct action *next = a->next;
		if (a->kind == ACT_WRITE_PTR && a->child) {
			kill_child((struct comm *)a->ptr);
		}
		free(a);
		a = next;
	}
}

// child_ptr is write_ptr for a Split or Shrink child.
static struct action *write_ptr(void **out, void *ptr);
static struct action *child_ptr(void **out, struct comm *c) {
	struct action *a = write_ptr(out, c);
	if (a) {
		a->child = 1;
	}
	return a;
}

static struct action *write_ptr(void **out, void *ptr) {
	struct action *a = calloc(1, sizeof *a);
	if (a) {
		a->kind = ACT_WRITE_PTR;
		a->out = out;
		a->ptr = ptr;
	}
	return a;
}

// set_state gives a child communicator the result of the operation that
// made it.
static struct action *set_state(struct comm *c, int result) {
	struct action *a = calloc(1, sizeof *a);
	if (a) {
		a->kind = ACT_SET_STATE;
		a->ptr = c;
		a->result = result;
	}
	return a;
}

HELPER struct action *write_bytes(void *dst, const void *src, size_t n) {
	struct action *a = calloc(1, sizeof *a);
	if (a) {
		a->kind = ACT_WRITE_BYTES;
		a->dst = dst;
		a->n = n < sizeof a->bytes ? n : sizeof a->bytes;
		memcpy(a->bytes, src, a->n);
	}
	return a;
}

static struct action *append(struct action *list, struct action *more) {
	if (!list) {
		return more;
	}
	struct action *a = list;
	while (a->next) {
		a = a->next;
	}
	a->next = more;
	return list;
}

// begin_locked starts an operation in progress on a non-blocking
// communicator: it completes with result after the polls FAKE_NCCL_POLLS (or
// FAKE_NCCL_COLL_POLLS) gives, or never when it hangs.
static int begin_locked(struct comm *c, const char *fn, int polls, int result, struct action *acts) {
	c->state = ncclInProgress;
	c->polls = polls;
	c->hang = knob.hang_all || in_list(knob.hang, fn);
	c->pending_result = result;
	c->actions = append(c->actions, acts);
	return ncclInProgress;
}

static void complete_locked(struct comm *c) {
	c->state = c->pending_result;
	if (c->state != ncclSuccess && knob.async_early > 0) {
		c->late = knob.async_early; // the job runs on: its actions later
		return;
	}
	struct action *acts = c->actions;
	c->actions = NULL;
	run_actions(acts);
}

// poll_locked is ncclCommGetAsyncError's view: it completes the operation
// in progress once its polls are used up (and ends a job that failed
// early once its late polls are).
static int poll_locked(struct comm *c) {
	if (c->state == ncclInProgress && !c->hang) {
		if (c->polls > 0) {
			c->polls--;
		} else {
			complete_locked(c);
		}
	} else if (c->late > 0 && --c->late == 0) {
		struct action *acts = c->actions;
		c->actions = NULL;
		run_actions(acts);
	}
	return c->state;
}

// ensure_ready is ncclCommEnsureReady: the previous operation must have
// completed (ncclInvalidArgument while in progress); an error state is
// returned as is.
static int ensure_ready(struct comm *c, const char *fn) {
	pthread_mutex_lock(&mu);
	int st = poll_locked(c);
	pthread_mutex_unlock(&mu);
	if (st == ncclInProgress) {
		return fail(ncclInvalidArgument, fn,
			    "Attempt to use communicator before the previous operation returned ncclSuccess");
	}
	if (st != ncclSuccess) {
		return fail(st, fn, "the communicator is in error state %d", st);
	}
	return ncclSuccess;
}

// finalize_peers_missing counts the live ranks of c's clique, other than
// c, whose ncclCommFinalize has not taken effect (mu held).
static int finalize_peers_missing(struct comm *c) {
	int n = 0;
	for (struct comm *o = comms; o && c->clique; o = o->next) {
		if (o != c && o->clique == c->clique && !o->dead && !o->fin_arrived) {
			n++;
		}
	}
	return n;
}

// finalize_wait is the wait of a blocking ncclCommFinalize for the other
// ranks of its communicator in this process (FAKE_NCCL_FINALIZE_WAITS_PEERS),
// mu released between polls. Real NCCL waits without end; the fake gives up
// after FAKE_NCCL_FINALIZE_WAIT_MS and says it would have hung.
static int finalize_wait(struct comm *c, const char *fn) {
	if (!knob.finalize_waits || !c->config.blocking || !c->clique) {
		return ncclSuccess;
	}
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pthread_mutex_lock(&mu);
		int missing = finalize_peers_missing(c);
		pthread_mutex_unlock(&mu);
		if (missing == 0) {
			return ncclSuccess;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= knob.finalize_wait_ms) {
			return fail(ncclInvalidUsage, fn,
				    "rank %d waited %ld ms for %d other rank(s) of its communicator in this process to call "
				    "ncclCommFinalize; real NCCL (2.31+) would have hung here: finalize the ranks one thread "
				    "drives inside one group",
				    c->rank, ms, missing);
		}
		usleep(1000);
	}
}

// ---------------------------------------------------------------------------
// Groups, per thread as in NCCL. Operations issued inside a group take
// effect at the outermost ncclGroupEnd.

struct entry {
	struct comm *comm;
	const char *fn;
	enum { E_OP, E_SEND, E_RECV } kind;
	int async;  // goes in progress on a non-blocking communicator
	int polls;
	int result; // what the operation completes with
	int keep;   // a failure does not change a blocking communicator's state
	struct action *acts;
	uintptr_t buf; // E_SEND, E_RECV
	size_t bytes;
	int peer;
	struct entry *next;
};

static __thread int group_depth;
static __thread int group_error;
static __thread int group_blocking = -1;
static __thread struct entry *group_entries, **group_tail; // group_tail NULL: the list is empty

// group_error_check is ncclGroupErrCheck: inside a group a failure is
// remembered and returned again by ncclGroupEnd.
static int group_error_check(int r) {
	if (group_depth > 0 && r != ncclSuccess && r != ncclInProgress && group_error == ncclSuccess) {
		group_error = r;
	}
	return r;
}

// group_join checks that a group does not mix blocking and non-blocking
// communicators.
static int group_join(struct comm *c, const char *fn) {
	if (group_depth == 0) {
		return ncclSuccess;
	}
	if (group_blocking == -1) {
		group_blocking = c->config.blocking;
	} else if (group_blocking != c->config.blocking) {
		return group_error_check(
			fail(ncclInvalidArgument, fn, "Blocking and nonblocking communicators are not allowed in the same group."));
	}
	return ncclSuccess;
}

static void group_add(struct entry e) {
	struct entry *p = malloc(sizeof *p);
	if (!p) {
		drop_actions(e.acts);
		return;
	}
	*p = e;
	p->next = NULL;
	if (!group_tail) {
		group_tail = &group_entries;
	}
	*group_tail = p;
	group_tail = &p->next;
}

// submit_keep makes an operation on c take effect: inside a group at its
// end; on a blocking communicator (or a synchronous operation) now; on a
// non-blocking one it goes in progress and returns ncclInProgress. A failure
// becomes c's state, except on a blocking communicator when keep is set (an
// operation that makes another communicator: NCCL returns the error and
// leaves the parent as it was).
static int submit_keep(struct comm *c, const char *fn, int async, int polls, int result, struct action *acts, int keep) {
	if (group_depth > 0) {
		group_add((struct entry){.comm = c, .fn = fn, .kind = E_OP, .async = async, .polls = polls, .result = result,
					 .keep = keep, .acts = acts});
		return ncclSuccess;
	}
	pthread_mutex_lock(&mu);
	int r;
	if (async && !c->config.blocking) {
		r = begin_locked(c, fn, polls, result, acts);
	} else {
		if (!keep) {
			c->state = result;
		}
		run_actions(acts);
		r = result;
	}
	pthread_mutex_unlock(&mu);
	if (r != ncclSuccess && r != ncclInProgress) {
		fail(r, fn, "operation failed asynchronously (FAKE_NCCL_ASYNC_FAIL)");
	}
	return r;
}

static int submit(struct comm *c, const char *fn, int async, int polls, int result, struct action *acts) {
	return submit_keep(c, fn, async, polls, result, acts, 0);
}

// match_p2p copies each send to self into the receive from self it matches
// (in order), then forgets the point-to-point entries.
static int match_p2p(const char *fn, int move) {
	int r = ncclSuccess;
	for (struct entry *s = group_entries; s; s = s->next) {
		if (s->kind != E_SEND || s->peer != s->comm->rank) {
			continue;
		}
		struct entry *m = NULL;
		for (struct entry *e = group_entries; e; e = e->next) {
			if (e->kind == E_RECV && e->comm == s->comm && e->peer == s->comm->rank) {
				m = e;
				break;
			}
		}
		if (!m) {
			r = fail(ncclInvalidUsage, fn, "ncclSend to self (rank %d) has no matching ncclRecv in the group; "
				 "real NCCL would hang", s->comm->rank);
			break;
		}
		if (m->bytes != s->bytes) {
			r = fail(ncclInvalidUsage, fn, "ncclSend of %zu bytes to self matched with an ncclRecv of %zu bytes",
				 s->bytes, m->bytes);
			break;
		}
		if (move && s->bytes) {
			memmove((void *)m->buf, (const void *)s->buf, s->bytes);
		}
		m->kind = E_OP; // consumed
		m->async = 0;
		s->kind = E_OP;
		s->async = 0;
	}
	if (r == ncclSuccess) {
		for (struct entry *e = group_entries; e; e = e->next) {
			if (e->kind == E_RECV && e->peer == e->comm->rank) {
				r = fail(ncclInvalidUsage, fn, "ncclRecv from self (rank %d) has no matching ncclSend in the "
					 "group; real NCCL would hang", e->comm->rank);
				break;
			}
		}
	}
	return r;
}

// group_finish runs the staged operations of the outermost group.
#if SINCE(23100)
static void coll_config_group_end(void);
#else
static void coll_config_group_end(void) {}
#endif

static int group_finish(const char *fn, int simulate) {
	coll_config_group_end();
	int r = group_error;
	if (r == ncclSuccess) {
		r = match_p2p(fn, !simulate);
	}
	int inprogress = 0;
	pthread_mutex_lock(&mu);
	for (struct entry *e = group_entries; e && r == ncclSuccess && !simulate; e = e->next) {
		if (strcmp(e->fn, "ncclCommFinalize") == 0 && !e->comm->dead) {
			e->comm->fin_arrived = 1; // the finalizes of one group count together
		}
	}
	for (struct entry *e = group_entries; e; e = e->next) {
		struct comm *c = e->comm;
		if (c->dead) {
			drop_actions(e->acts);
			continue;
		}
		if (r != ncclSuccess) { // groupCleanup: the communicators take the error
			drop_actions(e->acts);
			if (!c->config.blocking) {
				c->state = r;
			}
			continue;
		}
		int async = e->async && !c->config.blocking;
		if (async && c->state == ncclInProgress) { // several operations of one communicator
			c->actions = append(c->actions, e->acts);
			if (e->result != ncclSuccess) {
				c->pending_result = e->result;
			}
		} else if (async) {
			begin_locked(c, e->fn, e->polls, e->result, e->acts);
		} else {
			run_actions(e->acts);
			if (e->result != ncclSuccess) {
				if (!e->keep) {
					c->state = e->result;
				}
				r = fail(e->result, e->fn, "operation failed (FAKE_NCCL_ASYNC_FAIL)");
			}
		}
		inprogress |= async;
	}
	pthread_mutex_unlock(&mu);
	for (struct entry *e = group_entries; e && r == ncclSuccess && !simulate; e = e->next) {
		if (strcmp(e->fn, "ncclCommFinalize") == 0 && !e->comm->dead) {
			r = finalize_wait(e->comm, e->fn);
		}
	}
	for (struct entry *e = group_entries; e;) {
		struct entry *next = e->next;
		free(e);
		e = next;
	}
	group_entries = NULL;
	group_tail = &group_entries;
	group_error = ncclSuccess;
	group_blocking = -1;
	if (r != ncclSuccess) {
		return r;
	}
	return inprogress ? ncclInProgress : ncclSuccess;
}

EXPORT int ncclGroupStart(void) {
	ENTER("ncclGroupStart");
	group_depth++;
	return ncclSuccess;
}

EXPORT int ncclGroupEnd(void) {
	ENTER("ncclGroupEnd");
	if (group_depth == 0) {
		return fail(ncclInvalidUsage, "ncclGroupEnd", "ncclGroupEnd: not in a group call.");
	}
	if (--group_depth > 0) {
		return ncclSuccess;
	}
	return group_finish("ncclGroupEnd", 0);
}

#if SINCE(22203)
// ncclSimInfo_t, 2.22.3 and later.
struct sim_info {
	size_t size;
	unsigned int magic, version;
	float estimatedTime;
};

EXPORT int ncclGroupSimulateEnd(struct sim_info *info) {
	ENTER("ncclGroupSimulateEnd");
	if (group_depth == 0) {
		return fail(ncclInvalidUsage, "ncclGroupSimulateEnd", "ncclGroupEnd: not in a group call.");
	}
	if (--group_depth > 0) {
		return ncclSuccess;
	}
	struct sim_info in = {0};
	size_t size = 0;
	if (group_error == ncclSuccess && info) {
		memcpy(&size, &info->size, sizeof size);
		if (size > sizeof in) {
			size = sizeof in;
		}
		memcpy(&in, info, size);
		if (in.magic != SIM_MAGIC) {
			group_error = fail(ncclInvalidArgument, "ncclGroupSimulateEnd",
					   "ncclSimInfo_t argument not initialized via NCCL_SIM_INFO_INITIALIZER");
		}
	}
	int r = group_finish("ncclGroupSimulateEnd", 1);
	if (r == ncclSuccess && info) {
		in.estimatedTime = 42.5f;
		memcpy(info, &in, size);
	}
	return r;
}
#endif

// ---------------------------------------------------------------------------
// ncclConfig_t.

static size_t config_size(int v) {
	if (v >= 23203) return 120; // nvlsHostMode at 112
	if (v >= 23100) return 112; // 2.31.0a16: rmaEagerInit at 104 (+4 padding); 2.31.2: hostCftMode at 108
	if (v >= 23003) return 96;
	if (v >= 22902) return 88;
	if (v >= 22803) return 80;
	if (v >= 22703) return 72;
	return 48;
}

static int max_channels(int v) { return v >= 22501 ? 64 : 32; }

// cta_policy_valid: 0-1 in 2.27, 0-2 in 2.28, any OR of the flags from 2.29.2.
static int cta_policy_valid(int p, int v) {
	if (v >= 22902) return p >= 0 && p <= 3;
	if (v >= 22803) return p >= 0 && p <= 2;
	return p >= 0 && p <= 1;
}

static struct raw_config default_raw(void) {
	struct raw_config d = {sizeof d, API_MAGIC, 0, UNDEF, UNDEF, UNDEF, UNDEF, NULL, UNDEF, UNDEF, NULL,
			       UNDEF, UNDEF, UNDEF, UNDEF, UNDEF, UNDEF, UNDEF, UNDEF, UNDEF, UNDEF,
			       UNDEF, UNDEF, UNDEF, UNDEF, UNDEF};
	return d;
}

// config_log writes, to FAKE_NCCL_LOG, what the library read of a
// caller's ncclConfig_t: "config <fn> size=S version=V hostCftMode=H
// nvlsHostMode=N", S the size the caller sent, V the version it declared,
// the fields as read (after the resets for an older version), "-" for a
// field the library's release does not have.
static void config_log(const char *fn, size_t sent, const struct raw_config *c, int v) {
	if (knob.log_fd < 0) {
		return;
	}
	char h[16] = "-", n[16] = "-";
	if (v >= 23102) snprintf(h, sizeof h, "%d", c->hostCftMode); // 2.31.0a16 has padding there
	if (v >= 23203) snprintf(n, sizeof n, "%d", c->nvlsHostMode);
	log_line("config %s size=%zu version=%u hostCftMode=%s nvlsHostMode=%s\n", fn, sent, c->version, h, n);
}

// parse_config is NCCL's parseCommConfig for the reported release: clamp the
// size, check the magic, reset fields newer than the config's version, check
// the values, apply the defaults and NCCL_COMM_BLOCKING.
static int parse_config(const void *p, struct config *out, const char *fn) {
	int v = version();
	struct raw_config c = default_raw(), d = default_raw();
	if (p) {
		size_t size, sent;
		memcpy(&size, p, sizeof size);
		sent = size;
		size_t lib = config_size(v);
		if (size > lib) {
			size = lib;
		}
		if (v >= 22203) {
			c.magic = 0; // a size too small for the magic fails the check
		}
		memcpy(&c, p, size);
		if (c.magic != API_MAGIC) {
			return fail(ncclInvalidArgument, fn, "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
		}
		unsigned int cv = c.version;
		if (cv < 21400) c.blocking = d.blocking;
		if (cv < 21700) c.cgaClusterSize = d.cgaClusterSize, c.minCTAs = d.minCTAs, c.maxCTAs = d.maxCTAs, c.netName = NULL;
		if (v >= 22703 && cv < 22500) c.trafficClass = d.trafficClass;
		if (v >= 22703 && cv < 22700) c.collnetEnable = c.CTAPolicy = c.shrinkShare = c.nvlsCTAs = UNDEF;
		if (v >= 22803 && cv < 22800) c.nChannelsPerNetPeer = c.nvlinkCentricSched = UNDEF;
		if (v >= 22902 && cv < 22900) c.graphUsageMode = c.numRmaCtx = UNDEF;
		if (v >= 23003 && cv < 23000) c.maxP2pPeers = UNDEF;
		if (v >= 23007 && cv < 23005) c.graphStreamOrdering = UNDEF;
		if (v >= 23100 && cv < 23100) c.launchOrderImplicit = c.numRmaSig = c.rmaEagerInit = UNDEF;
		// hostCftMode (2.31.2) and nvlsHostMode (2.32.3): the version below
		// which NCCL resets them is not known (no 2.31.2 or 2.32.3 source
		// was read), so the fake resets them only for a config older than
		// 2.31.0, which cannot have them.
		if (v >= 23102 && cv < 23100) c.hostCftMode = UNDEF;
		if (v >= 23203 && cv < 23100) c.nvlsHostMode = UNDEF;
		config_log(fn, sent, &c, v);
	}
#define BAD(field, value) fail(ncclInvalidArgument, fn, "Invalid config " field " attribute value %d", value)
	if (c.blocking != UNDEF && c.blocking != 0 && c.blocking != 1) return BAD("blocking", c.blocking);
	if (c.cgaClusterSize != UNDEF && c.cgaClusterSize < 0) return BAD("cgaClusterSize", c.cgaClusterSize);
	if ((c.minCTAs != UNDEF && c.minCTAs <= 0) || (c.maxCTAs != UNDEF && c.maxCTAs <= 0) || c.minCTAs > c.maxCTAs) {
		return fail(ncclInvalidArgument, fn, "Invalid config min/max channels attribute value %d/%d", c.minCTAs,
			    c.maxCTAs);
	}
	if (c.splitShare != UNDEF && c.splitShare != 0 && c.splitShare != 1) return BAD("splitShare", c.splitShare);
	if (v >= 22703) {
		if (c.collnetEnable != UNDEF && (c.collnetEnable < 0 || c.collnetEnable > 1)) return BAD("collnetEnable", c.collnetEnable);
		if (c.CTAPolicy != UNDEF && !cta_policy_valid(c.CTAPolicy, v)) return BAD("policy", c.CTAPolicy);
		if (c.shrinkShare != UNDEF && c.shrinkShare != 0 && c.shrinkShare != 1) return BAD("shrinkShare", c.shrinkShare);
		if (c.nvlsCTAs != UNDEF && c.nvlsCTAs <= 0) return BAD("nvlsCTAs", c.nvlsCTAs);
	}
	if (v >= 22803) {
		if (c.nChannelsPerNetPeer != UNDEF && (c.nChannelsPerNetPeer <= 0 || c.nChannelsPerNetPeer > max_channels(v)))
			return BAD("nChannelsPerNetPeer", c.nChannelsPerNetPeer);
		if (c.nvlinkCentricSched != UNDEF && c.nvlinkCentricSched != 0 && c.nvlinkCentricSched != 1)
			return BAD("nvlinkCentricSched", c.nvlinkCentricSched);
	}
	if (v >= 22902) {
		if (c.graphUsageMode != UNDEF && (c.graphUsageMode < 0 || c.graphUsageMode > 2)) return BAD("graphUsageMode", c.graphUsageMode);
		if (c.numRmaCtx != UNDEF && c.numRmaCtx < 0) return BAD("numRmaCtx", c.numRmaCtx);
	}
	if (v >= 23003 && c.maxP2pPeers != UNDEF && c.maxP2pPeers <= 0) return BAD("maxP2pPeers", c.maxP2pPeers);
	if (v >= 23007 && c.graphStreamOrdering != UNDEF && c.graphStreamOrdering != 0 && c.graphStreamOrdering != 1)
		return BAD("graphStreamOrdering", c.graphStreamOrdering);
	if (v >= 23100) { // STyGIANet/nccl 2.31.0a16 src/init.cc parseCommConfig
		if (c.numRmaSig != UNDEF && c.numRmaSig < 0) return BAD("numRmaSig", c.numRmaSig);
		if (c.launchOrderImplicit != UNDEF && c.launchOrderImplicit != 0 && c.launchOrderImplicit != 1)
			return BAD("launchOrderImplicit", c.launchOrderImplicit);
		if (c.rmaEagerInit != UNDEF && c.rmaEagerInit != 0 && c.rmaEagerInit != 1)
			return BAD("rmaEagerInit", c.rmaEagerInit);
	}
	// nvlsHostMode (2.32.3): NVIDIA's documentation gives the values (unset,
	// any OR of DisableTransport 1 and DisableSymmetricMultimem 2, or
	// Disable INT_MAX); how NCCL checks others is not known, so the fake
	// refuses them, as the binding does before calling NCCL.
	if (v >= 23203 && c.nvlsHostMode != UNDEF && c.nvlsHostMode != INT_MAX && (c.nvlsHostMode & ~3) != 0)
		return BAD("nvlsHostMode", c.nvlsHostMode);
#undef BAD
#define DEF(field, value)                  \
	if (c.field == UNDEF) {            \
		c.field = (value);         \
	}
	DEF(blocking, 1);
	DEF(cgaClusterSize, 4);
	DEF(minCTAs, 1);
	DEF(maxCTAs, max_channels(v));
	DEF(splitShare, 0);
	DEF(collnetEnable, 0);
	DEF(CTAPolicy, 0);
	DEF(shrinkShare, 0);
	DEF(nvlinkCentricSched, 0);
	DEF(graphUsageMode, 2);
	DEF(numRmaCtx, 1);
	if (v >= 23100) {
		DEF(numRmaSig, 1);
		DEF(rmaEagerInit, 0);
	}
#undef DEF
	const char *env = getenv("NCCL_COMM_BLOCKING");
	if (env && *env) {
		c.blocking = atoi(env) != 0;
	}
	if (c.graphStreamOrdering == UNDEF) {
		c.graphStreamOrdering = 1;
	}
	*out = (struct config){c.blocking, c.cgaClusterSize, c.minCTAs, c.maxCTAs, c.netName, c.splitShare,
			       c.trafficClass, c.commName, c.collnetEnable, c.CTAPolicy, c.shrinkShare, c.nvlsCTAs,
			       c.nChannelsPerNetPeer, c.nvlinkCentricSched, c.graphUsageMode, c.numRmaCtx,
			       c.maxP2pPeers, c.graphStreamOrdering, c.launchOrderImplicit, c.numRmaSig,
			       c.rmaEagerInit, c.hostCftMode, c.nvlsHostMode};
	return ncclSuccess;
}

// ---------------------------------------------------------------------------
// Library, version and errors.

#ifndef FAKE_NOT_NCCL // the "notnccl" variant: a library without ncclGetVersion
EXPORT int ncclGetVersion(int *v) {
	ENTER("ncclGetVersion");
	if (!v) {
		return fail(ncclInvalidArgument, "ncclGetVersion", "version argument is NULL");
	}
	*v = version();
	return ncclSuccess;
}
#endif

static void random_id(ncclUniqueId *id) {
	static unsigned int seed;
	pthread_mutex_lock(&mu);
	if (!seed) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		seed = (unsigned int)(ts.tv_nsec ^ ts.tv_sec ^ getpid()) | 1;
	}
	for (int i = 0; i < 128; i++) {
		id->internal[i] = (char)(rand_r(&seed) % 255 + 1); // never zero
	}
	pthread_mutex_unlock(&mu);
}

EXPORT int ncclGetUniqueId(ncclUniqueId *id) {
	ENTER("ncclGetUniqueId");
	if (!id) {
		return fail(ncclInvalidArgument, "ncclGetUniqueId", "GetUniqueId : out argument is NULL");
	}
	random_id(id);
	return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(int code) {
	pthread_once(&once, read_knobs);
	trace("ncclGetErrorString");
	switch (code) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
	case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	case ncclTimeout: return version() >= 23003 ? "timeout" : "unknown result code";
	default: return "unknown result code";
	}
}

#if SINCE(21304)
// The buffer is process-wide and its contents stay until the next failure.
EXPORT const char *ncclGetLastError(void *comm) {
	(void)comm;
	pthread_once(&once, read_knobs);
	trace("ncclGetLastError");
	return last_error;
}
#endif

// ---------------------------------------------------------------------------
// Communicator creation.

// clique_of names the clique of the ranks made with unique id id (FNV-1a;
// the top bit clear, unlike ncclCommInitAll's cliques).
static uint64_t clique_of(const ncclUniqueId *id) {
	uint64_t h = 14695981039346656037ull;
	for (int i = 0; i < 128; i++) {
		h = (h ^ (unsigned char)id->internal[i]) * 1099511628211ull;
	}
	return (h >> 1) | 1;
}

// init_rank is ncclCommInitRankDev: one rank of a new communicator, on the
// calling thread's device.
static int init_rank(const char *fn, void **newcomm, int nranks, int nid, const ncclUniqueId *ids, int rank,
		     const void *config) {
	if (knob.init_delay_ms > 0) {
		usleep((useconds_t)knob.init_delay_ms * 1000);
	}
	int dev = -1;
	int r = current_device(fn, &dev);
	if (r) {
		return r;
	}
	if (nid <= 0 || nid > nranks) {
		return fail(ncclInvalidArgument, fn, "improper usage of ncclCommInitRank: nId = %d, nranks=%d", nid, nranks);
	}
	if (!newcomm) {
		return fail(ncclInvalidArgument, fn, "CommInitRank : newcomm argument is NULL");
	}
	if (!ids) {
		return fail(ncclInvalidArgument, fn, "commId argument is NULL");
	}
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		*newcomm = NULL;
		return fail(ncclInvalidArgument, fn, "Invalid rank requested : %d/%d", rank, nranks);
	}
	struct config cfg;
	if ((r = parse_config(config, &cfg, fn)) != ncclSuccess) {
		*newcomm = NULL;
		return r;
	}
	struct comm *c = new_comm(nranks, rank, dev, &cfg);
	if (!c) {
		*newcomm = NULL;
		return fail(ncclSystemError, fn, "out of memory");
	}
	if (nranks > 1) {
		c->clique = clique_of(&ids[0]);
	}
	*newcomm = c; // before the communicator is ready, as NCCL does
	if ((r = group_join(c, fn)) != ncclSuccess) {
		return r;
	}
	return submit(c, fn, 1, knob.polls, async_fail(fn), NULL);
}

EXPORT int ncclCommInitRank(void **newcomm, int nranks, ncclUniqueId id, int rank) {
	ENTER("ncclCommInitRank");
	return group_error_check(init_rank("ncclCommInitRank", newcomm, nranks, 1, &id, rank, NULL));
}

#if SINCE(21403)
EXPORT int ncclCommInitRankConfig(void **newcomm, int nranks, ncclUniqueId id, int rank, void *config) {
	ENTER("ncclCommInitRankConfig");
	return group_error_check(init_rank("ncclCommInitRankConfig", newcomm, nranks, 1, &id, rank, config));
}
#endif

#if SINCE(22304)
EXPORT int ncclCommInitRankScalable(void **newcomm, int nranks, int rank, int nid, ncclUniqueId *ids, void *config) {
	ENTER("ncclCommInitRankScalable");
	return group_error_check(init_rank("ncclCommInitRankScalable", newcomm, nranks, nid, ids, rank, config));
}
#endif

// ncclCommInitAll: ndev blocking communicators of one clique, rank i on
// devlist[i] (or device i).
EXPORT int ncclCommInitAll(void **comms_out, int ndev, const int *devlist) {
	const char *fn = "ncclCommInitAll";
	ENTER("ncclCommInitAll");
	if (!comms_out) {
		return fail(ncclInvalidArgument, fn, "CommInitAll : comms argument is NULL");
	}
	if (ndev < 0) {
		return fail(ncclInvalidArgument, fn, "Invalid device count requested : %d", ndev);
	}
	int total = 0;
	int cr = cu_cuDeviceGetCount(&total);
	if (cr) {
		return fail(ncclUnhandledCudaError, fn, "cudaGetDeviceCount failed: CUDA error %d", cr);
	}
	if (devlist) {
		for (int i = 0; i < ndev; i++) {
			if (devlist[i] < 0 || devlist[i] >= total) {
				return fail(ncclInvalidArgument, fn, "Invalid device %d (totalnDev=%d)", devlist[i], total);
			}
			for (int j = 0; j < i; j++) {
				int optout = version() >= 23003 && env_int("NCCL_MULTI_RANK_GPU_ENABLE", 0) == 1;
				if (devlist[j] == devlist[i] && !optout) {
					return fail(ncclInvalidUsage, fn, "Duplicate GPU detected : rank %d and rank %d both on "
						    "CUDA device %d", j, i, devlist[i]);
				}
			}
		}
	}
	struct config cfg;
	int r = parse_config(NULL, &cfg, fn);
	if (r) {
		return r;
	}
	int result = async_fail(fn);
	static uint64_t cliques; // ncclCommInitAll's cliques: the top bit set
	uint64_t clique = ndev > 1 ? (__atomic_add_fetch(&cliques, 1, __ATOMIC_RELAXED) | (1ull << 63)) : 0;
	for (int i = 0; i < ndev; i++) {
		struct comm *c = new_comm(ndev, i, devlist ? devlist[i] : i, &cfg);
		if (!c) {
			return fail(ncclSystemError, fn, "out of memory");
		}
		c->clique = clique;
		c->state = result;
		comms_out[i] = c;
	}
	return result ? fail(result, fn, "initialization failed (FAKE_NCCL_ASYNC_FAIL)") : ncclSuccess;
}

// child_config is the config of a child: the parent's without one.
static int child_config(struct comm *parent, const void *config, struct config *out, const char *fn) {
	if (!config) {
		*out = parent->config;
		return ncclSuccess;
	}
	return parse_config(config, out, fn);
}

#if SINCE(21801)
// ncclCommSplit: the child is written into *newcomm when the split
// completes (NULL until then, and NULL for NCCL_SPLIT_NOCOLOR). Its size is
// FAKE_NCCL_SPLIT_NRANKS or the parent's, and its rank min(max(key, 0),
// size-1): the fake cannot see the other ranks' colors and keys.
EXPORT int ncclCommSplit(void *comm, int color, int key, void **newcomm, void *config) {
	const char *fn = "ncclCommSplit";
	ENTER("ncclCommSplit");
	struct comm *p;
	int r = comm_check(comm, fn, &p);
	if (r) {
		return group_error_check(r);
	}
	if (!newcomm) {
		return group_error_check(fail(ncclInvalidArgument, fn, "newcomm argument is NULL"));
	}
	if ((r = ensure_ready(p, fn)) != ncclSuccess) {
		return group_error_check(r);
	}
	*newcomm = NULL;
	struct action *act = NULL;
	if (color != SPLIT_NOCOLOR) {
		struct config cfg;
		if ((r = child_config(p, config, &cfg, fn)) != ncclSuccess) {
			return group_error_check(r);
		}
		int n = knob.split_nranks > 0 ? knob.split_nranks : p->nranks;
		int rank = key < 0 ? 0 : (key < n ? key : n - 1);
		struct comm *c = new_comm(n, rank, p->cudaDev, &cfg);
		if (!c) {
			return group_error_check(fail(ncclSystemError, fn, "out of memory"));
		}
		if (p->config.splitShare == 1) {
			p->shares_memory = c->shares_memory = 1;
		}
		// NCCL stores the child when the split ends, also when it failed.
		act = append(child_ptr(newcomm, c), set_state(c, async_fail(fn)));
	}
	if ((r = group_join(p, fn)) != ncclSuccess) {
		drop_actions(act);
		return r;
	}
	return group_error_check(submit_keep(p, fn, 1, knob.polls, async_fail(fn), act, 1));
}
#endif

HELPER int compare_ints(const void *a, const void *b) {
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

#if SINCE(22703)
// ncclCommShrink: sorts excludeRanksList in place (as NCCL does); the
// child's rank is the parent's less the excluded ranks below it.
EXPORT int ncclCommShrink(void *comm, int *exclude, int nexclude, void **newcomm, void *config, int flags) {
	const char *fn = "ncclCommShrink";
	ENTER("ncclCommShrink");
	(void)flags;
	struct comm *p;
	int r = comm_check(comm, fn, &p);
	if (r) {
		return group_error_check(r);
	}
	if (!newcomm) {
		return group_error_check(fail(ncclInvalidArgument, fn, "newcomm argument is NULL"));
	}
	if (!exclude) {
		return group_error_check(fail(ncclInvalidArgument, fn, "excludeRanksList argument is NULL"));
	}
	if (nexclude <= 0) {
		return group_error_check(fail(ncclInvalidArgument, fn, "excludeRanksCount %d must be positive", nexclude));
	}
	qsort(exclude, (size_t)nexclude, sizeof(int), compare_ints);
	if (bsearch(&p->rank, exclude, (size_t)nexclude, sizeof(int), compare_ints)) {
		return group_error_check(fail(ncclInvalidArgument, fn, "rank %d is in excludeRanksList: excluded ranks must "
					       "not call ncclCommShrink", p->rank));
	}
	if ((r = ensure_ready(p, fn)) != ncclSuccess) {
		return group_error_check(r);
	}
	*newcomm = NULL;
	int n = p->nranks - nexclude, rank = p->rank;
	for (int i = 0; i < nexclude; i++) {
		if (exclude[i] < p->rank) {
			rank--;
		}
	}
	if (n < 1) {
		return group_error_check(fail(ncclInvalidArgument, fn, "excluding %d of %d ranks leaves none", nexclude,
					       p->nranks));
	}
	struct config cfg;
	if ((r = child_config(p, config, &cfg, fn)) != ncclSuccess) {
		return group_error_check(r);
	}
	struct comm *c = new_comm(n, rank, p->cudaDev, &cfg);
	if (!c) {
		return group_error_check(fail(ncclSystemError, fn, "out of memory"));
	}
	struct action *act = append(child_ptr(newcomm, c), set_state(c, async_fail(fn)));
	if ((r = group_join(p, fn)) != ncclSuccess) {
		drop_actions(act);
		return r;
	}
	return group_error_check(submit_keep(p, fn, 1, knob.polls, async_fail(fn), act, 1));
}
#endif

#if SINCE(22902)
EXPORT int ncclCommGetUniqueId(void *comm, ncclUniqueId *id) {
	const char *fn = "ncclCommGetUniqueId";
	ENTER("ncclCommGetUniqueId");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r || (r = ensure_ready(c, fn))) {
		return r;
	}
	if (!id) {
		return fail(ncclInvalidArgument, fn, "CommGetUniqueId : uniqueId argument is NULL");
	}
	const char *commid = getenv("NCCL_COMM_ID");
	if (commid && *commid) {
		return fail(ncclInvalidUsage, fn, "ncclCommGetUniqueId is not supported with NCCL_COMM_ID set");
	}
	random_id(id);
	return ncclSuccess;
}

// ncclCommGrow: as in NCCL, *newcomm is written at once and the new
// communicator carries the operation in progress. Existing ranks keep their
// rank and device; joining ranks (comm NULL) take the given rank and the
// calling thread's device.
EXPORT int ncclCommGrow(void *comm, int nranks, const ncclUniqueId *id, int rank, void **newcomm, void *config) {
	const char *fn = "ncclCommGrow";
	ENTER("ncclCommGrow");
	if (!newcomm) {
		return fail(ncclInvalidArgument, fn, "newcomm argument is NULL");
	}
	if (nranks <= 0) {
		return fail(ncclInvalidArgument, fn, "ncclCommGrow: total ranks must be positive, got %d", nranks);
	}
	struct comm *p = NULL;
	int r;
	if (comm && (r = comm_check(comm, fn, &p)) != ncclSuccess) {
		return r;
	}
	if (p && nranks <= p->nranks) {
		return fail(ncclInvalidArgument, fn, "ncclCommGrow: total ranks %d is less than current ranks %d", nranks,
			    p->nranks);
	}
	*newcomm = NULL;
	int dev = -1, myrank;
	if (p) {
		if ((r = ensure_ready(p, fn)) != ncclSuccess) {
			return group_error_check(r);
		}
		if (rank != -1) {
			return group_error_check(fail(ncclInvalidArgument, fn, "ncclCommGrow: existing ranks must pass rank=-1, "
						       "got %d", rank));
		}
		dev = p->cudaDev;
		myrank = p->rank;
	} else {
		if (rank < 0) {
			return group_error_check(fail(ncclInvalidArgument, fn, "ncclCommGrow: new ranks must pass valid rank >= 0, "
						       "got %d", rank));
		}
		if (!id) {
			return group_error_check(fail(ncclInvalidArgument, fn, "ncclCommGrow: new ranks must pass non-NULL uniqueId"));
		}
		if (rank >= nranks) {
			return group_error_check(fail(ncclInvalidArgument, fn, "ncclCommGrow: new rank %d exceeds total ranks %d",
						       rank, nranks));
		}
		if ((r = current_device(fn, &dev)) != ncclSuccess) {
			return group_error_check(r);
		}
		myrank = rank;
	}
	struct config cfg;
	r = p ? child_config(p, config, &cfg, fn) : parse_config(config, &cfg, fn);
	if (r) {
		return group_error_check(r);
	}
	struct comm *c = new_comm(nranks, myrank, dev, &cfg);
	if (!c) {
		return group_error_check(fail(ncclSystemError, fn, "out of memory"));
	}
	*newcomm = c;
	if ((r = group_join(c, fn)) != ncclSuccess) {
		return r;
	}
	return group_error_check(submit(c, fn, 1, knob.polls, async_fail(fn), NULL));
}
#endif

// ---------------------------------------------------------------------------
// Teardown and state.

#if SINCE(21403)
EXPORT int ncclCommFinalize(void *comm) {
	const char *fn = "ncclCommFinalize";
	ENTER("ncclCommFinalize");
	if (!comm) {
		return ncclSuccess;
	}
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r || (r = ensure_ready(c, fn))) {
		return group_error_check(r);
	}
	if (c->finalized) {
		return group_error_check(fail(ncclInvalidArgument, fn, "the communicator was already finalized (or revoked)"));
	}
	c->finalized = 1;
	if ((r = group_join(c, fn)) != ncclSuccess) {
		return r;
	}
	if (group_depth == 0) {
		pthread_mutex_lock(&mu);
		c->fin_arrived = 1;
		pthread_mutex_unlock(&mu);
		if ((r = finalize_wait(c, fn)) != ncclSuccess) {
			return r;
		}
	}
	return group_error_check(submit(c, fn, 1, knob.polls, async_fail(fn), NULL));
}
#endif

// kill marks a communicator destroyed; it stays in memory so that a later
// use is detected.
// kill_child marks a child NCCL never delivered destroyed (mu may or may
// not be held: only the child's own fields change).
static void kill_child(struct comm *c) {
	if (!c->dead) {
		c->dead = 1;
		c->magic = 0;
		trace_live(__atomic_sub_fetch(&live_comms, 1, __ATOMIC_RELAXED));
	}
}

static void kill_locked(struct comm *c) {
	if (!c->dead) {
		trace_live(__atomic_sub_fetch(&live_comms, 1, __ATOMIC_RELAXED));
	}
	c->dead = 1;
	c->magic = 0;
	drop_actions(c->actions);
	c->actions = NULL;
	for (struct window *w = c->windows; w; w = w->next) {
		w->alive = 0;
	}
	for (struct reg *g = c->regs; g; g = g->next) {
		g->alive = 0;
	}
	for (struct devcomm *d = c->devcomms; d; d = d->next) {
		d->alive = 0;
	}
}

EXPORT int ncclCommDestroy(void *comm) {
	const char *fn = "ncclCommDestroy";
	ENTER("ncclCommDestroy");
	if (!comm) {
		return ncclSuccess;
	}
	struct comm *c = lookup(comm);
	if (!c) {
		return fail(ncclInvalidArgument, fn, "%p is not a communicator", comm);
	}
	// NCCL 2.28.3-2.30.7 take these two early returns after
	// ncclGroupStartInternal, leaving the thread's group depth raised
	// (src/init.cc, ncclCommDestroy); the fake does the same, so that tests
	// see the binding repair it.
	if (c->dead) {
		group_depth++;
		return fail(ncclInvalidArgument, fn, "comm %p has already been destroyed", comm);
	}
	int r = ensure_ready(c, fn);
	if (r) {
		group_depth++;
		return r;
	}
	pthread_mutex_lock(&mu);
	kill_locked(c);
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

EXPORT int ncclCommAbort(void *comm) {
	const char *fn = "ncclCommAbort";
	ENTER("ncclCommAbort");
	if (!comm) {
		return ncclSuccess;
	}
	struct comm *c = lookup(comm);
	if (!c || c->dead) {
		return fail(ncclInvalidArgument, fn, "comm %p is %s", comm, c ? "already destroyed" : "not a communicator");
	}
	pthread_mutex_lock(&mu);
	kill_locked(c);
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

#if SINCE(22807)
EXPORT int ncclCommRevoke(void *comm, int flags) {
	const char *fn = "ncclCommRevoke";
	ENTER("ncclCommRevoke");
	if (!comm) {
		return ncclSuccess;
	}
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (flags != 0) {
		return fail(ncclInvalidArgument, fn, "revokeFlags %d: only NCCL_REVOKE_DEFAULT (0) is supported", flags);
	}
	if (c->finalized) {
		return fail(ncclInvalidArgument, fn, "the communicator is finalized%s", c->revoked ? " (revoked)" : "");
	}
	if (c->revoked) {
		return fail(ncclInvalidArgument, fn, "the communicator is already revoked");
	}
	c->revoked = 1;
	c->finalized = 1;
	pthread_mutex_lock(&mu);
	if (c->state == ncclInProgress) { // the abort flag stops the operation in progress
		drop_actions(c->actions);
		c->actions = NULL;
		c->state = ncclSuccess;
	}
	pthread_mutex_unlock(&mu);
	return submit(c, fn, 1, knob.polls, async_fail(fn), NULL);
}
#endif

#if SINCE(22907)
EXPORT int ncclCommSuspend(void *comm, int flags) {
	const char *fn = "ncclCommSuspend";
	ENTER("ncclCommSuspend");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r || (r = ensure_ready(c, fn))) {
		return r;
	}
	if (flags & SUSPEND_MEM) {
		if (c->shares_memory) {
			return fail(ncclInvalidUsage, fn, "Memory suspend not supported with split_share communicators");
		}
		if (c->suspended) {
			return fail(ncclInvalidUsage, fn, "MemManager: Already suspended");
		}
		c->suspended = 1;
	}
	return submit(c, fn, 1, knob.polls, async_fail(fn), NULL);
}

EXPORT int ncclCommResume(void *comm) {
	const char *fn = "ncclCommResume";
	ENTER("ncclCommResume");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r || (r = ensure_ready(c, fn))) {
		return r;
	}
	if (c->shares_memory) {
		return fail(ncclInvalidUsage, fn, "Memory resume not supported with split_share communicators");
	}
	if (!c->suspended) {
		return fail(ncclInvalidUsage, fn, "MemManager: Not in suspended state");
	}
	c->suspended = 0;
	return submit(c, fn, 1, knob.polls, async_fail(fn), NULL);
}

// ncclCommMemStats: 1 MiB of suspendable memory (scratch) and 2 MiB of
// persistent memory.
EXPORT int ncclCommMemStats(void *comm, int stat, uint64_t *value) {
	const char *fn = "ncclCommMemStats";
	ENTER("ncclCommMemStats");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r || (r = ensure_ready(c, fn))) {
		return r;
	}
	if (!value) {
		return fail(ncclInvalidArgument, fn, "value argument is NULL");
	}
	const uint64_t scratch = 1 << 20, persist = 2 << 20;
	switch (stat) {
	case 0: *value = scratch; break;            // ncclStatGpuMemSuspend
	case 1: *value = (uint64_t)c->suspended; break; // ncclStatGpuMemSuspended
	case 2: *value = persist; break;            // ncclStatGpuMemPersist
	case 3: *value = scratch + persist; break;  // ncclStatGpuMemTotal
	default: return fail(ncclInvalidArgument, fn, "unknown ncclCommMemStat_t %d", stat);
	}
	return ncclSuccess;
}
#endif

EXPORT int ncclCommGetAsyncError(void *comm, int *state) {
	const char *fn = "ncclCommGetAsyncError";
	ENTER("ncclCommGetAsyncError");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (!state) {
		return fail(ncclInvalidArgument, fn, "asyncError argument is NULL");
	}
	pthread_mutex_lock(&mu);
	*state = poll_locked(c);
	pthread_mutex_unlock(&mu);
	return ncclSuccess;
}

// ---------------------------------------------------------------------------
// Queries.

static int query(void *comm, int *out, const char *fn, int what) {
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (!out) {
		return fail(ncclInvalidArgument, fn, "output argument is NULL");
	}
	if ((r = ensure_ready(c, fn)) != ncclSuccess) {
		return r;
	}
	*out = what == 0 ? c->nranks : what == 1 ? c->cudaDev : c->rank;
	return ncclSuccess;
}

EXPORT int ncclCommCount(void *comm, int *count) {
	ENTER("ncclCommCount");
	return query(comm, count, "ncclCommCount", 0);
}

EXPORT int ncclCommCuDevice(void *comm, int *dev) {
	ENTER("ncclCommCuDevice");
	return query(comm, dev, "ncclCommCuDevice", 1);
}

EXPORT int ncclCommUserRank(void *comm, int *rank) {
	ENTER("ncclCommUserRank");
	return query(comm, rank, "ncclCommUserRank", 2);
}

// ---------------------------------------------------------------------------
// Device-API versioning (NCCL's src/init.cc: a caller version newer than the
// library is rejected, older ones read a prefix).

enum { COMPAT_NONE, COMPAT_22902, COMPAT_22907, COMPAT_23000, COMPAT_23100 };

HELPER int version_check_enabled(void) { return env_int("NCCL_ENABLE_VERSION_CHECK", 1) != 0; }

// compat picks how a library of the reported version treats a struct
// declaring version declared: the layout family, or COMPAT_NONE with the
// error set.
HELPER int compat(unsigned int declared, const char *fn, int *entry) {
	int v = version();
	if ((int)declared > v && version_check_enabled()) {
		return fail(ncclInvalidUsage, fn, "NCCL library is too old. This application was compiled with NCCL version "
			    "%u, but is running with NCCL library version %d.", declared, v);
	}
	if (v < 22907) { // 2.29.2-2.29.3: any version up to the library's
		*entry = COMPAT_22902;
		return ncclSuccess;
	}
	if (v < 23000) { // 2.29.7: a 2.29.2 shim, else the current layout
		*entry = (declared == 22902 || declared == 22903) ? COMPAT_22902 : COMPAT_22907;
		return ncclSuccess;
	}
	if (declared >= 22902 && declared <= 22903) {
		*entry = COMPAT_22902;
	} else if (declared >= 22905 && declared <= 22907) {
		*entry = COMPAT_22907;
	} else if (declared >= 23000 && (int)declared <= (v >= 23100 ? 23007 : v)) {
		*entry = COMPAT_23000;
	} else if (v >= 23100 && declared >= 23100 && (int)declared <= v) {
		// 2.31 (STyGIANet/nccl 2.31.0a16 src/devcomm/devcomm_v23100.cc):
		// [23000, 23007] keeps the 2.30 layouts, [23100, library] is new;
		// 23008-23099 match no entry.
		*entry = COMPAT_23100;
	} else {
		return fail(ncclInvalidUsage, fn, "NCCL library is not backwards compatible. This application was compiled "
			    "with NCCL version %u, but is running with NCCL library version %d.", declared, v);
	}
	return ncclSuccess;
}

HELPER void put_i32(void *base, size_t off, int32_t v) { memcpy((char *)base + off, &v, 4); }
HELPER void put_u8(void *base, size_t off, int v) { ((unsigned char *)base)[off] = (unsigned char)v; }
HELPER int32_t get_i32(const void *base, size_t off) {
	int32_t v;
	memcpy(&v, (const char *)base + off, 4);
	return v;
}
HELPER uint32_t get_u32(const void *base, size_t off) { return (uint32_t)get_i32(base, off); }
HELPER int get_u8(const void *base, size_t off) { return ((const unsigned char *)base)[off]; }

// The LSA team is the whole communicator unless FAKE_NCCL_LSA_TEAMS > 1.
HELPER int lsa_size(const struct comm *c) {
	int t = knob.lsa_teams > 0 ? knob.lsa_teams : 1;
	return c->nranks % t == 0 ? c->nranks / t : c->nranks;
}

#if SINCE(22902)
// ncclCommQueryProperties. Offsets (§3.5): rank 16, nRanks 20, cudaDev 24,
// nvmlDev 28, deviceApiSupport 32, multimemSupport 33; ginType 34 (1 byte,
// 40-byte struct) or 36; nLsaTeams 40, hostRmaSupport 44, railedGinType 48.
EXPORT int ncclCommQueryProperties(void *comm, void *props) {
	const char *fn = "ncclCommQueryProperties";
	ENTER("ncclCommQueryProperties");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (!props) {
		return fail(ncclInvalidArgument, fn, "props argument is NULL");
	}
	if ((r = ensure_ready(c, fn)) != ncclSuccess) {
		return r;
	}
	if (get_u32(props, 8) != API_MAGIC) {
		return fail(ncclInvalidUsage, fn, "Cannot get communicator properties: ncclCommProperties_t argument must be "
			    "initialized via NCCL_COMM_PROPERTIES_INITIALIZER");
	}
	unsigned int declared = get_u32(props, 12);
	int entry;
	if ((r = compat(declared, fn, &entry)) != ncclSuccess) {
		return r;
	}
	int v = version();
	int apiSupport = knob.no_symmetric ? 0 : 1;
	put_i32(props, 16, c->rank);
	put_i32(props, 20, c->nranks);
	put_i32(props, 24, c->cudaDev);
	put_i32(props, 28, knob.nvml_dev >= 0 ? knob.nvml_dev : c->cudaDev + 1);
	put_u8(props, 32, apiSupport);
	put_u8(props, 33, knob.multimem);
	if (v < 22907) { // 2.29.2-2.29.3: the library's own 40-byte layout
		put_u8(props, 34, knob.gin_type);
		return ncclSuccess;
	}
	// 2.29.7 fills the 56-byte layout except for a 2.29.2 caller; 2.30.x
	// fills the later fields for callers declaring more than 2.29.3.
	int wide = v < 23000 ? entry != COMPAT_22902 : declared > 22903;
	if (wide) {
		put_i32(props, 36, knob.gin_type);
		put_i32(props, 40, knob.lsa_teams);
		put_u8(props, 44, knob.host_rma);
		put_i32(props, 48, knob.railed_gin_type);
	}
	// 2.31 (STyGIANet/nccl 2.31.0a16 src/dev_runtime.cc; the 144-byte layout
	// of nccl4py's bindings of 2.31.2): commHash 56, ginMinStride 64,
	// ginConnectionType 68, ginSupport[64] 72, devCommRuntimeVersionSize 136,
	// for callers declaring 2.31.0 or later.
	if (v >= 23100 && declared >= 23100) {
		// NCCL hashes the communicator's unique id: the same on all its
		// ranks. The fake's clique stands for it (one rank: its address).
		uint64_t hash = c->clique ? c->clique : 0x66616b6500000000ull | (uint64_t)(uintptr_t)c;
		memcpy((char *)props + 56, &hash, 8);
		put_i32(props, 64, knob.gin_conn == 1 ? 1 : lsa_size(c));
		put_i32(props, 68, knob.gin_conn);
		memset((char *)props + 72, 0, 64);
		if (knob.gin_conn != 0 && knob.gin_type > 0 && knob.gin_type < 64) {
			put_u8(props, 72 + (size_t)knob.gin_type, 1);
		}
		uint64_t dcsize = 256;
		memcpy((char *)props + 136, &dcsize, 8);
	}
	// The filters of the older layouts (2.29.7 has only the 2.29.2 one).
	int legacy = entry == COMPAT_22902 || (entry == COMPAT_22907 && v >= 23000);
	if (legacy && lsa_size(c) != c->nranks) {
		put_u8(props, 32, 0);
	}
	if (entry == COMPAT_22902) {
		put_u8(props, 34, 0);
	} else if (legacy) {
		put_i32(props, 36, 0);
		put_i32(props, 48, 0);
	}
	return ncclSuccess;
}
#endif

// ---------------------------------------------------------------------------
// Memory, registration and windows.

#if SINCE(21901)
// ncclMemAlloc: cuMem ("VMM") memory on the current device, 4096-aligned.
EXPORT int ncclMemAlloc(void **ptr, size_t size) {
	const char *fn = "ncclMemAlloc";
	ENTER("ncclMemAlloc");
	if (!ptr) {
		return fail(ncclUnhandledCudaError, fn, "cudaMalloc: invalid argument (ptr is NULL)");
	}
	if (size == 0) {
		*ptr = NULL; // cudaMalloc of 0 bytes
		return ncclSuccess;
	}
	uintptr_t p = 0;
	int cr = cu_fakecuda_alloc(&p, size, WIN_ALIGNMENT);
	if (cr) {
		return fail(ncclUnhandledCudaError, fn, "cuMemCreate failed: CUDA error %d", cr);
	}
	*ptr = (void *)p;
	return ncclSuccess;
}

EXPORT int ncclMemFree(void *ptr) {
	const char *fn = "ncclMemFree";
	ENTER("ncclMemFree");
	if (!ptr) {
		return ncclSuccess;
	}
	int cr = cu_fakecuda_free((uintptr_t)ptr);
	if (cr) {
		return fail(ncclUnhandledCudaError, fn, "%p was not allocated by ncclMemAlloc (or was freed): CUDA error %d",
			    ptr, cr);
	}
	return ncclSuccess;
}

// ncclCommRegister: a handle per registration; NCCL_LOCAL_REGISTER=0 gives a
// NULL handle.
EXPORT int ncclCommRegister(void *comm, void *buff, size_t size, void **handle) {
	const char *fn = "ncclCommRegister";
	ENTER("ncclCommRegister");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (!handle) {
		return fail(ncclInvalidArgument, fn, "handle argument is NULL");
	}
	if (env_int("NCCL_LOCAL_REGISTER", 1) == 0) {
		*handle = NULL;
		return ncclSuccess;
	}
	struct reg *g = calloc(1, sizeof *g);
	if (!g) {
		return fail(ncclSystemError, fn, "out of memory");
	}
	*g = (struct reg){(uintptr_t)buff, size, 1, c, NULL};
	pthread_mutex_lock(&mu);
	g->next = c->regs;
	c->regs = g;
	pthread_mutex_unlock(&mu);
	*handle = g;
	return ncclSuccess;
}

EXPORT int ncclCommDeregister(void *comm, void *handle) {
	const char *fn = "ncclCommDeregister";
	ENTER("ncclCommDeregister");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (!handle) {
		return ncclSuccess;
	}
	pthread_mutex_lock(&mu);
	struct reg *g = c->regs;
	while (g && ((void *)g != handle || !g->alive)) {
		g = g->next;
	}
	if (g) {
		g->alive = 0;
	}
	pthread_mutex_unlock(&mu);
	if (!g) {
		return fail(ncclInvalidUsage, fn, "Deregister: Could not find handle %p", handle);
	}
	return ncclSuccess;
}
#endif

HELPER struct window *lookup_window(const void *h) {
	pthread_mutex_lock(&mu);
	struct window *found = NULL;
	for (struct comm *c = comms; c && !found; c = c->next) {
		for (struct window *w = c->windows; w; w = w->next) {
			if ((const void *)w == h && w->alive) {
				found = w;
				break;
			}
		}
	}
	pthread_mutex_unlock(&mu);
	return found;
}

#if SINCE(22703)
// win_log writes, to FAKE_NCCL_LOG, the flags a registration passed:
// "window <fn> flags=0x<hex>" (NCCL_WIN_COLL_SYMMETRIC 0x1,
// NCCL_WIN_STRICT_ORDERING 0x2, and from 2.32.3 NCCL_WIN_GIN_ONLY 0x4 and
// NCCL_WIN_CFT_COUNTED 0x8; the fake keeps the flags without acting on
// them).
static void win_log(const char *fn, int flags) { log_line("window %s flags=0x%x\n", fn, (unsigned)flags); }

// ncclCommWindowRegister: the window is written when the registration
// completes (at the end of a group, or when a non-blocking communicator's
// operation completes). The buffer must come from ncclMemAlloc, at a
// multiple of 4096 bytes from the start of its allocation, on the
// communicator's device. Without symmetric memory (FAKE_NCCL_NO_WINDOW=1)
// the call succeeds without a window: *win is set to NULL first, except in
// 2.28.x, which leaves it untouched.
EXPORT int ncclCommWindowRegister(void *comm, void *buff, size_t size, void **win, int flags) {
	const char *fn = "ncclCommWindowRegister";
	ENTER("ncclCommWindowRegister");
	int v = version();
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return group_error_check(r);
	}
	if (!win) {
		return group_error_check(fail(ncclInvalidArgument, fn, "win argument is NULL"));
	}
	int in_228 = v >= 22803 && v < 22902;
	if (!in_228) {
		*win = NULL;
	}
	if (!buff || size == 0) {
		if (in_228) {
			return ncclSuccess;
		}
		return group_error_check(fail(ncclInvalidArgument, fn, "invalid pointer %p / size %zu", buff, size));
	}
	if (knob.no_window) {
		return ncclSuccess;
	}
	if ((r = ensure_ready(c, fn)) != ncclSuccess) {
		return group_error_check(r);
	}
	int dev = -1, vmm = 0;
	uintptr_t base = 0;
	if (!cu_fakecuda_memory((uintptr_t)buff, size, &dev, &vmm, &base, NULL) || !vmm) {
		return group_error_check(fail(ncclInvalidArgument, fn, "buffer %p (%zu bytes) is not cuMem memory from "
					       "ncclMemAlloc", buff, size));
	}
	if (((uintptr_t)buff - base) % WIN_ALIGNMENT != 0) {
		return group_error_check(fail(ncclInvalidArgument, fn, "buffer %p is %zu bytes into its allocation, not a "
					       "multiple of NCCL_WIN_REQUIRED_ALIGNMENT (4096)", buff,
					       (size_t)((uintptr_t)buff - base)));
	}
	if (dev != c->cudaDev) {
		return group_error_check(fail(ncclInvalidArgument, fn, "buffer %p is on device %d, the communicator on %d",
					       buff, dev, c->cudaDev));
	}
	win_log(fn, flags);
	struct window *w = calloc(1, sizeof *w);
	if (!w) {
		return group_error_check(fail(ncclSystemError, fn, "out of memory"));
	}
	*w = (struct window){c, (uintptr_t)buff, size, flags, 1, NULL, 0};
	pthread_mutex_lock(&mu);
	for (struct window *o = c->windows; o; o = o->next) {
		w->big_offset += (o->size + (2u << 20) - 1) / (2u << 20) * (2u << 20);
	}
	w->next = c->windows;
	c->windows = w;
	pthread_mutex_unlock(&mu);
	if ((r = group_join(c, fn)) != ncclSuccess) {
		return r;
	}
	return group_error_check(submit(c, fn, 1, knob.polls, async_fail(fn), write_ptr(win, w)));
}

EXPORT int ncclCommWindowDeregister(void *comm, void *win) {
	const char *fn = "ncclCommWindowDeregister";
	ENTER("ncclCommWindowDeregister");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (!win) {
		return ncclSuccess;
	}
	struct window *w = lookup_window(win);
	if (!w || w->comm != c) {
		return fail(ncclInvalidArgument, fn, "window %p is not registered with this communicator", win);
	}
	w->alive = 0;
	return ncclSuccess;
}
#endif

#if SINCE(22902)
EXPORT int ncclWinGetUserPtr(void *comm, void *win, void **out) {
	const char *fn = "ncclWinGetUserPtr";
	ENTER("ncclWinGetUserPtr");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (!out) {
		return fail(ncclInvalidArgument, fn, "outUserPtr argument is NULL");
	}
	if (knob.no_window) {
		*out = NULL;
		return ncclSuccess;
	}
	if (!win) {
		return fail(ncclInvalidArgument, fn, "win argument is NULL");
	}
	struct window *w = lookup_window(win);
	if (!w || w->comm != c) {
		return fail(ncclInvalidArgument, fn, "window %p is not registered with this communicator", win);
	}
	*out = (void *)w->user;
	return ncclSuccess;
}

// The device-pointer getters. The LSA team of a rank is the block of
// lsa_size ranks holding it; its members' windows are laid out at a stride
// (big_size) from this rank's, so this rank's own pointer is its buffer.
static size_t big_size(const struct window *w) { return (w->size + (2u << 20) - 1) / (2u << 20) * (2u << 20); }

static int window_arg(void *win, void **out, const char *fn, struct window **w) {
	if (!win) {
		return fail(ncclInvalidArgument, fn, "window argument is NULL");
	}
	if (!out) {
		return fail(ncclInvalidArgument, fn, "outPtr argument is NULL");
	}
	if (!(*w = lookup_window(win))) {
		return fail(ncclInvalidArgument, fn, "Could not find communicator matching window %p", win);
	}
	return ncclSuccess;
}

static int lsa_pointer(struct window *w, size_t offset, int lsa_rank, void **out, const char *fn) {
	const struct comm *c = w->comm;
	int n = lsa_size(c);
	if (lsa_rank < 0 || lsa_rank >= n) {
		return fail(ncclInvalidArgument, fn, "The provided lsaRank %d is not in the valid lsaSize of [0,%d]", lsa_rank, n);
	}
	if (offset >= w->size) {
		return fail(ncclInvalidArgument, fn, "offset %zu is beyond the window's %zu bytes", offset, w->size);
	}
	int mine = c->rank % n;
	*out = (void *)(w->user + offset + (uintptr_t)((intptr_t)(lsa_rank - mine) * (intptr_t)big_size(w)));
	return ncclSuccess;
}

EXPORT int ncclGetLsaMultimemDevicePointer(void *win, size_t offset, void **out) {
	const char *fn = "ncclGetLsaMultimemDevicePointer";
	ENTER("ncclGetLsaMultimemDevicePointer");
	struct window *w;
	int r = window_arg(win, out, fn, &w);
	if (r) {
		return r;
	}
	if (!knob.multimem) {
		*out = NULL;
		return ncclSuccess;
	}
	*out = (void *)(w->user + offset); // a stand-in multicast address
	return ncclSuccess;
}

typedef struct {
	void *mcBasePtr;
} ncclMultimemHandle_t;

EXPORT int ncclGetMultimemDevicePointer(void *win, size_t offset, ncclMultimemHandle_t mm, void **out) {
	const char *fn = "ncclGetMultimemDevicePointer";
	ENTER("ncclGetMultimemDevicePointer");
	struct window *w;
	if (!win || !out) {
		return fail(ncclInvalidArgument, fn, "%s argument is NULL", win ? "outPtr" : "window");
	}
	if (!mm.mcBasePtr) {
		return fail(ncclInvalidArgument, fn, "MCBasePtr %p needs to be valid.", mm.mcBasePtr);
	}
	int r = window_arg(win, out, fn, &w);
	if (r) {
		return r;
	}
	*out = knob.multimem ? (void *)((uintptr_t)mm.mcBasePtr + offset) : NULL;
	return ncclSuccess;
}

EXPORT int ncclGetLsaDevicePointer(void *win, size_t offset, int lsa_rank, void **out) {
	const char *fn = "ncclGetLsaDevicePointer";
	ENTER("ncclGetLsaDevicePointer");
	struct window *w;
	int r = window_arg(win, out, fn, &w);
	return r ? r : lsa_pointer(w, offset, lsa_rank, out, fn);
}

// ncclGetPeerDevicePointer: NULL for a peer outside this rank's LSA team.
EXPORT int ncclGetPeerDevicePointer(void *win, size_t offset, int peer, void **out) {
	const char *fn = "ncclGetPeerDevicePointer";
	ENTER("ncclGetPeerDevicePointer");
	struct window *w;
	int r = window_arg(win, out, fn, &w);
	if (r) {
		return r;
	}
	const struct comm *c = w->comm;
	if (peer < 0 || peer >= c->nranks) {
		return fail(ncclInvalidArgument, fn, "peer %d is not within valid range of ranks %d.", peer, c->nranks);
	}
	int n = lsa_size(c);
	if (peer / n != c->rank / n) {
		*out = NULL;
		return ncclSuccess;
	}
	return lsa_pointer(w, offset, peer % n, out, fn);
}
#endif

// ---------------------------------------------------------------------------
// Reduction operators.

#if SINCE(21104)
// ncclRedOpCreatePreMulSum returns ncclNumOps + the operator's index.
EXPORT int ncclRedOpCreatePreMulSum(int *op, void *scalar, int datatype, int residence, void *comm) {
	const char *fn = "ncclRedOpCreatePreMulSum";
	ENTER("ncclRedOpCreatePreMulSum");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r || (r = ensure_ready(c, fn))) {
		return r;
	}
	if (!op || !scalar) {
		return fail(ncclInvalidArgument, fn, "%s argument is NULL", op ? "scalar" : "op");
	}
	struct redop o = {1, datatype, residence, 0};
	if (residence == 1) { // ncclScalarHostImmediate: read now
		if (datatype < 0 || datatype >= (int)(sizeof type_size / sizeof type_size[0])) {
			return fail(ncclInternalError, fn, "unknown datatype %d", datatype);
		}
		memcpy(&o.scalar, scalar, (size_t)type_size[datatype]);
	} else {
		o.scalar = (uint64_t)(uintptr_t)scalar;
	}
	pthread_mutex_lock(&mu);
	int ix = 0;
	while (ix < c->nops && c->ops[ix].alive) {
		ix++;
	}
	if (ix == c->nops) {
		struct redop *ops = realloc(c->ops, (size_t)(c->nops + 1) * sizeof *ops);
		if (!ops) {
			pthread_mutex_unlock(&mu);
			return fail(ncclSystemError, fn, "out of memory");
		}
		c->ops = ops;
		c->nops++;
	}
	c->ops[ix] = o;
	pthread_mutex_unlock(&mu);
	*op = NUM_OPS + ix;
	return ncclSuccess;
}

EXPORT int ncclRedOpDestroy(int op, void *comm) {
	const char *fn = "ncclRedOpDestroy";
	ENTER("ncclRedOpDestroy");
	if (op >= 0 && op < NUM_OPS) {
		return fail(ncclInvalidArgument, fn, "ncclRedOpDestroy : operator is a NCCL builtin.");
	}
	if (op < 0) {
		return fail(ncclInvalidArgument, fn, "ncclRedOpDestroy :  operator is garbage.");
	}
	if (!comm) {
		return fail(ncclInvalidArgument, fn, "ncclRedOpDestroy : invalid communicator passed.");
	}
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	int ix = op - NUM_OPS;
	pthread_mutex_lock(&mu);
	int known = ix < c->nops && c->ops[ix].alive;
	if (known) {
		c->ops[ix].alive = 0;
	}
	pthread_mutex_unlock(&mu);
	if (!known) {
		return fail(ncclInvalidArgument, fn, "ncclRedOpDestroy : operator unknown to this communicator.");
	}
	return ncclSuccess;
}
#endif

// ---------------------------------------------------------------------------
// Collectives and point-to-point.

enum coll {
	C_ALLREDUCE, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL, C_GATHER, C_SCATTER, C_SEND, C_RECV,
};

static int num_types(void) { return version() >= 22403 ? 12 : 10; }

// check_buffer: count*size bytes (times mult) at p must be device memory of
// the communicator's device (NCCL's CudaPtrCheck, which real NCCL does with
// NCCL_CHECK_POINTERS=1; the fake always checks, since it copies).
static int check_buffer(const struct comm *c, const void *p, size_t bytes, const char *fn, const char *what) {
	if (bytes == 0) {
		return ncclSuccess;
	}
	int dev = -1;
	if (!cu_fakecuda_memory((uintptr_t)p, bytes, &dev, NULL, NULL, NULL)) {
		return fail(ncclInvalidArgument, fn, "%s %p (%zu bytes) is not a valid pointer", what, p, bytes);
	}
	if (dev != c->cudaDev) {
		return fail(ncclInvalidArgument, fn, "%s allocated on device %d mismatchs with NCCL device %d", what, dev,
			    c->cudaDev);
	}
	return ncclSuccess;
}

// collective is ncclEnqueueCheck and taskAppend for one call.
static int collective(const char *fn, enum coll kind, const void *send, void *recv, size_t count, int dt, int op,
		      int root, void *comm, void *stream) {
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (c->revoked) {
		return fail(ncclInvalidUsage, fn, "%s: communicator was revoked", fn);
	}
	if (c->finalized) {
		return fail(ncclInvalidUsage, fn, "the communicator was finalized (real NCCL would fail or hang)");
	}
	if ((r = ensure_ready(c, fn)) != ncclSuccess) {
		return r;
	}
	if (root < 0 || root >= c->nranks) {
		return fail(ncclInvalidArgument, fn, "%s : invalid %s %d (should be in the 0..%d range)", fn,
			    kind == C_SEND || kind == C_RECV ? "peer" : "root", root, c->nranks - 1);
	}
	if (dt < 0 || dt >= num_types()) {
		return fail(ncclInvalidArgument, fn, "%s : invalid type %d", fn, dt);
	}
	if (op < 0) {
		return fail(ncclInvalidArgument, fn, "%s : invalid reduction operation %d", fn, op);
	}
	struct redop user = {0};
	if (op >= NUM_OPS) {
		int ix = op - NUM_OPS;
		pthread_mutex_lock(&mu);
		if (ix < c->nops) {
			user = c->ops[ix];
		}
		pthread_mutex_unlock(&mu);
		if (!user.alive) {
			return fail(ncclInvalidArgument, fn, "%s : reduction operation %d unknown to this communicator", fn, op);
		}
	}
	int reduces = kind == C_ALLREDUCE || kind == C_REDUCE || kind == C_REDUCESCATTER;
	if (reduces && count > 0) {
		if ((dt == 10 || dt == 11) && cu_fakecuda_compute_capability() < 90) {
			return fail(ncclInvalidArgument, fn, "FP8 reduction support begins with sm90 capable devices.");
		}
		if (user.alive && user.datatype != dt) {
			return fail(ncclInvalidArgument, fn, "Data type supplied to user-created ncclRedOp_t does not match type "
				    "given to reduction operation");
		}
	}
	int sdev = cu_fakecuda_stream_device(stream);
	if (sdev == -2) {
		return fail(ncclUnhandledCudaError, fn, "stream %p is not a live CUDA stream", stream);
	}
	if (sdev >= 0 && sdev != c->cudaDev) {
		return fail(ncclUnhandledCudaError, fn, "stream %p is on device %d, the communicator on device %d", stream,
			    sdev, c->cudaDev);
	}
	size_t n = (size_t)c->nranks, es = (size_t)type_size[dt], b = count * es;
	int is_root = c->rank == root;
	size_t sbytes = 0, rbytes = 0; // what this rank reads and writes
	switch (kind) {
	case C_ALLREDUCE: sbytes = rbytes = b; break;
	case C_BROADCAST: sbytes = is_root ? b : 0; rbytes = b; break;
	case C_REDUCE: sbytes = b; rbytes = is_root ? b : 0; break;
	case C_ALLGATHER: sbytes = b; rbytes = n * b; break;
	case C_REDUCESCATTER: sbytes = n * b; rbytes = b; break;
	case C_ALLTOALL: sbytes = rbytes = n * b; break;
	case C_GATHER: sbytes = b; rbytes = is_root ? n * b : 0; break;
	case C_SCATTER: sbytes = is_root ? n * b : 0; rbytes = b; break;
	case C_SEND: sbytes = b; break;
	case C_RECV: rbytes = b; break;
	}
	if ((r = check_buffer(c, send, sbytes, fn, "sendbuff")) != ncclSuccess ||
	    (r = check_buffer(c, recv, rbytes, fn, "recvbuff")) != ncclSuccess) {
		return r;
	}
	if ((r = group_join(c, fn)) != ncclSuccess) {
		return r;
	}
	if (kind == C_SEND || kind == C_RECV) {
		struct entry e = {.comm = c, .fn = fn, .kind = kind == C_SEND ? E_SEND : E_RECV,
				  .buf = (uintptr_t)(kind == C_SEND ? send : recv), .bytes = b, .peer = root};
		if (group_depth == 0) {
			if (root == c->rank) {
				return fail(ncclInvalidUsage, fn, "%s to self outside a group has no match; real NCCL would hang",
					    fn);
			}
		} else {
			group_add(e);
		}
	} else if (n == 1 && count > 0) {
		// One rank: every collective copies send to recv, scaled for PreMulSum.
		if (user.alive) {
			unsigned char s[8] = {0};
			if (user.residence == 1) {
				memcpy(s, &user.scalar, es);
			} else if (cu_fakecuda_memory((uintptr_t)user.scalar, es, NULL, NULL, NULL, NULL)) {
				memcpy(s, (const void *)(uintptr_t)user.scalar, es);
			} else {
				return fail(ncclInvalidArgument, fn, "the device scalar of operator %d is not device memory", op);
			}
			scale(recv, send, count, dt, s);
		} else if (send != recv) {
			memmove(recv, send, b);
		}
	}
	int async = knob.coll_polls >= 0;
	return submit(c, fn, async, async ? knob.coll_polls : 0, ncclSuccess, NULL);
}

#define COLLECTIVE(fn, ...)                                       \
	ENTER(fn);                                                \
	return group_error_check(collective(fn, __VA_ARGS__))

EXPORT int ncclAllReduce(const void *send, void *recv, size_t count, int dt, int op, void *comm, void *stream) {
	COLLECTIVE("ncclAllReduce", C_ALLREDUCE, send, recv, count, dt, op, 0, comm, stream);
}

EXPORT int ncclBroadcast(const void *send, void *recv, size_t count, int dt, int root, void *comm, void *stream) {
	COLLECTIVE("ncclBroadcast", C_BROADCAST, send, recv, count, dt, 0, root, comm, stream);
}

EXPORT int ncclBcast(void *buf, size_t count, int dt, int root, void *comm, void *stream) {
	COLLECTIVE("ncclBcast", C_BROADCAST, buf, buf, count, dt, 0, root, comm, stream);
}

EXPORT int ncclReduce(const void *send, void *recv, size_t count, int dt, int op, int root, void *comm, void *stream) {
	COLLECTIVE("ncclReduce", C_REDUCE, send, recv, count, dt, op, root, comm, stream);
}

EXPORT int ncclAllGather(const void *send, void *recv, size_t count, int dt, void *comm, void *stream) {
	COLLECTIVE("ncclAllGather", C_ALLGATHER, send, recv, count, dt, 0, 0, comm, stream);
}

EXPORT int ncclReduceScatter(const void *send, void *recv, size_t count, int dt, int op, void *comm, void *stream) {
	COLLECTIVE("ncclReduceScatter", C_REDUCESCATTER, send, recv, count, dt, op, 0, comm, stream);
}

#if SINCE(22803)
EXPORT int ncclAlltoAll(const void *send, void *recv, size_t count, int dt, void *comm, void *stream) {
	COLLECTIVE("ncclAlltoAll", C_ALLTOALL, send, recv, count, dt, 0, 0, comm, stream);
}

EXPORT int ncclGather(const void *send, void *recv, size_t count, int dt, int root, void *comm, void *stream) {
	COLLECTIVE("ncclGather", C_GATHER, send, recv, count, dt, 0, root, comm, stream);
}

EXPORT int ncclScatter(const void *send, void *recv, size_t count, int dt, int root, void *comm, void *stream) {
	COLLECTIVE("ncclScatter", C_SCATTER, send, recv, count, dt, 0, root, comm, stream);
}
#endif

#if SINCE(20703)
EXPORT int ncclSend(const void *send, size_t count, int dt, int peer, void *comm, void *stream) {
	COLLECTIVE("ncclSend", C_SEND, send, NULL, count, dt, 0, peer, comm, stream);
}

EXPORT int ncclRecv(void *recv, size_t count, int dt, int peer, void *comm, void *stream) {
	COLLECTIVE("ncclRecv", C_RECV, NULL, recv, count, dt, 0, peer, comm, stream);
}
#endif

#if SINCE(22902)
// One-sided operations (rmaTaskAppend): host RMA support, a CUDA driver of
// 12.5 or later, and sigIdx, ctx and flags 0.
static int rma_check(struct comm *c, int peer, int sigIdx, int ctx, unsigned int flags, void *stream, const char *fn) {
	int r = ensure_ready(c, fn);
	if (r) {
		return r;
	}
	if (c->revoked) {
		return fail(ncclInvalidUsage, fn, "%s: communicator was revoked", fn);
	}
	if (peer < 0 || peer >= c->nranks) {
		return fail(ncclInvalidArgument, fn, "%s : invalid peer %d (should be in the 0..%d range)", fn, peer,
			    c->nranks - 1);
	}
	if (!knob.host_rma) {
		return fail(ncclInvalidArgument, fn, "One sided RMA: host RMA is not supported in this communicator.");
	}
	int drv = 0;
	cu_cuDriverGetVersion(&drv);
	if (drv < 12050) {
		return fail(ncclInvalidUsage, fn, "One-sided RMA requires CUDA driver 12.5 or later (found %d.%d).",
			    drv / 1000, drv % 1000 / 10);
	}
	if (ctx != 0) {
		return fail(ncclInvalidArgument, fn, "Context %d is invalid (must be 0)", ctx);
	}
	if (sigIdx != 0 || flags != 0) {
		return fail(ncclInvalidArgument, fn, "sigIdx %d and flags %u must be 0", sigIdx, flags);
	}
	int sdev = cu_fakecuda_stream_device(stream);
	if (sdev == -2 || (sdev >= 0 && sdev != c->cudaDev)) {
		return fail(ncclUnhandledCudaError, fn, "stream %p is not a live stream of device %d", stream, c->cudaDev);
	}
	return ncclSuccess;
}

// ncclPutSignal: the source must lie in a symmetric window of this
// communicator; a put to self copies into the peer window.
EXPORT int ncclPutSignal(const void *local, size_t count, int dt, int peer, void *peerWin, size_t peerWinOffset,
			 int sigIdx, int ctx, unsigned int flags, void *comm, void *stream) {
	const char *fn = "ncclPutSignal";
	ENTER("ncclPutSignal");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r || (r = rma_check(c, peer, sigIdx, ctx, flags, stream, fn))) {
		return group_error_check(r);
	}
	if (dt < 0 || dt >= num_types()) {
		return group_error_check(fail(ncclInvalidArgument, fn, "%s : invalid type %d", fn, dt));
	}
	if (!peerWin) {
		return group_error_check(fail(ncclInvalidArgument, fn, "peerWin argument is NULL"));
	}
	struct window *pw = lookup_window(peerWin);
	if (!pw || pw->comm != c) {
		return group_error_check(fail(ncclInvalidArgument, fn, "peerWin %p is not a window of this communicator", peerWin));
	}
	size_t bytes = count * (size_t)type_size[dt];
	int found = 0;
	pthread_mutex_lock(&mu);
	for (struct window *w = c->windows; w; w = w->next) {
		if (w->alive && (w->flags & WIN_COLL_SYMMETRIC) && (uintptr_t)local >= w->user &&
		    (uintptr_t)local + bytes <= w->user + w->size) {
			found = 1;
		}
	}
	pthread_mutex_unlock(&mu);
	if (!found) {
		return group_error_check(fail(ncclInvalidArgument, fn, "localbuff %p is not inside a window registered with "
					       "NCCL_WIN_COLL_SYMMETRIC", local));
	}
	if (peerWinOffset > pw->size || bytes > pw->size - peerWinOffset) {
		return group_error_check(fail(ncclInvalidArgument, fn, "%zu bytes at offset %zu exceed the peer window's %zu",
					       bytes, peerWinOffset, pw->size));
	}
	if (peer == c->rank && bytes) {
		memmove((void *)(pw->user + peerWinOffset), local, bytes);
	}
	return ncclSuccess;
}

EXPORT int ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, void *comm, void *stream) {
	const char *fn = "ncclSignal";
	ENTER("ncclSignal");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r || (r = rma_check(c, peer, sigIdx, ctx, flags, stream, fn))) {
		return group_error_check(r);
	}
	return ncclSuccess;
}

// ncclWaitSignalDesc_t: opCnt, peer, sigIdx, ctx.
EXPORT int ncclWaitSignal(int ndesc, const int32_t *descs, void *comm, void *stream) {
	const char *fn = "ncclWaitSignal";
	ENTER("ncclWaitSignal");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return group_error_check(r);
	}
	if (ndesc < 0 || (ndesc > 0 && !descs)) {
		return group_error_check(fail(ncclInvalidArgument, fn, "invalid descriptors (%d at %p)", ndesc, (void *)descs));
	}
	if (ndesc == 0 && (r = rma_check(c, 0, 0, 0, 0, stream, fn))) {
		return group_error_check(r);
	}
	for (int i = 0; i < ndesc; i++) {
		const int32_t *d = descs + 4 * i;
		if (d[0] < 0) {
			return group_error_check(fail(ncclInvalidArgument, fn, "descriptor %d: opCnt %d", i, d[0]));
		}
		if ((r = rma_check(c, d[1], d[2], d[3], 0, stream, fn)) != ncclSuccess) {
			return group_error_check(r);
		}
	}
	return ncclSuccess;
}
#endif

// ---------------------------------------------------------------------------
// Device communicators (ncclDevCommCreate and ncclDevCommRequirements_t of
// NCCL's device headers, 2.28.3 onwards).

#if SINCE(22803)
// The requirements, whatever the layout.
struct reqs {
	int lsaMultimem, barrierCount, lsaBarrierCount, railGinBarrierCount, lsaLLA2ABlockCount, lsaLLA2ASlotCount;
	int ginForceEnable, ginContextCount, ginSignalCount, ginCounterCount, ginConnectionType, ginExclusiveContexts;
	int ginQueueDepth, ginTrafficClass, worldGinBarrierCount, ginStrongSignalsRequired, ginVaSignalsRequired;
	int ginCustomStride, ginType, useRuntimeVersion, cftCaps, cftBarrierCount; // 2.31
};

// read_versioned reads the 2.29.2+ layout: the header, then fields at fixed
// offsets, as far as n bytes go (the library's defaults beyond).
static void read_versioned(const unsigned char *p, size_t n, struct reqs *q) {
	*q = (struct reqs){.ginContextCount = 4, .ginTrafficClass = UNDEF, .ginStrongSignalsRequired = 1,
			   .ginVaSignalsRequired = 1, .ginCustomStride = 1};
#define I32(field, off) if (n >= (off) + 4) q->field = get_i32(p, off)
#define U8(field, off) if (n >= (off) + 1) q->field = get_u8(p, off)
	U8(lsaMultimem, 32);
	I32(barrierCount, 36);
	I32(lsaBarrierCount, 40);
	I32(railGinBarrierCount, 44);
	I32(lsaLLA2ABlockCount, 48);
	I32(lsaLLA2ASlotCount, 52);
	U8(ginForceEnable, 56);
	I32(ginContextCount, 60);
	I32(ginSignalCount, 64);
	I32(ginCounterCount, 68);
	I32(ginConnectionType, 72);
	U8(ginExclusiveContexts, 76);
	I32(ginQueueDepth, 80);
	I32(ginTrafficClass, 84);
	I32(worldGinBarrierCount, 88);
	U8(ginStrongSignalsRequired, 92);
	U8(ginVaSignalsRequired, 93);
	// 2.31.0a16 (STyGIANet/nccl core.h), 2.31.2 (nccl4py's bindings, NVIDIA's
	// 2.31.2 core.h: cftCaps and cftBarrierCount).
	I32(ginCustomStride, 96);
	I32(ginType, 100);
	U8(useRuntimeVersion, 104);
	I32(cftCaps, 108);
	I32(cftBarrierCount, 112);
#undef I32
#undef U8
}

// The size of the requirements layout of a declared version.
static size_t reqs_size(unsigned int declared) {
	if (declared >= 23102) return 120;
	if (declared >= 23100) return 112;
	if (declared >= 23003) return 96;
	if (declared >= 22907) return 88;
	return 72;
}

static int gin_requested(const struct reqs *q, int v) {
	return q->ginSignalCount > 0 || q->ginCounterCount > 0 || q->barrierCount > 0 || q->railGinBarrierCount > 0 ||
	       (v >= 23003 && q->worldGinBarrierCount > 0);
}

// node_gin reports whether a node of the resource list (2.28.7's 56-byte
// ncclDevResourceRequirements_t: ginSignalCount at 32, ginCounterCount at
// 36) asks for GIN signals or counters, as ncclGinResourcesRequested does
// from 2.29.7. -1: the list has a cycle.
static int node_gin(const unsigned char *node, int v) {
	if (v < 22807) {
		return 0;
	}
	for (int i = 0; node; i++) {
		if (i == 1024) {
			return -1;
		}
		if (get_i32(node, 32) > 0 || get_i32(node, 36) > 0) {
			return 1;
		}
		memcpy(&node, node, sizeof node);
	}
	return 0;
}

// internal_gin_signals is how many GIN signals the barriers NCCL adds in
// front of the caller's resource list take (ncclDevrCommCreateInternal):
// up to 2.29.3 the rail barriers' count; from 2.29.7 each GIN barrier
// takes nBarriers × its team's ranks (rail team: nranks / LSA size); the
// hybrid and world barriers came in 2.30.3, the hybrid world barrier
// (none on a RAIL connection, which ginForceEnable turns into FULL) in
// 2.30.7.
static int internal_gin_signals(const struct reqs *q, const struct comm *c, int v) {
	int rail = c->nranks / lsa_size(c);
	int bar = q->barrierCount > q->railGinBarrierCount ? q->barrierCount : q->railGinBarrierCount;
	if (v < 22907) {
		return bar;
	}
	if (v < 23003) {
		return bar * rail;
	}
	int n = q->barrierCount * rail + q->railGinBarrierCount * rail + q->worldGinBarrierCount * c->nranks;
	// The connection asked for: ginForceEnable means FULL whatever
	// ginConnectionType says.
	if (v >= 23007 && (q->ginForceEnable || q->ginConnectionType != 2)) {
		n += q->barrierCount * c->nranks;
	}
	return n;
}

// internal_buffer_units is how many 128-byte units of the resource window
// the barriers NCCL adds in front of the caller's resource list take
// (ncclDevrCommCreateInternal: each node starts 128-aligned), so that the
// caller's buffer handles start past them: the LSA barrier (lsaBarrierCount
// over the LSA team; max(barrierCount, lsaBarrierCount) from 2.28.7), and
// from 2.30.3 the hybrid LSA barrier (barrierCount) beside it; from 2.28.7
// to 2.29.3 the rail GIN barrier's buffer of max(barrierCount,
// railGinBarrierCount) x 4 contexts x 4 bytes. GIN barriers have no buffer
// from 2.29.7.
static uint32_t lsa_barrier_units(int n, int ranks) { return (uint32_t)(((3 * n + n * ranks) * 4 + 127) / 128); }

static uint32_t internal_buffer_units(const struct reqs *q, const struct comm *c, int v) {
	int lsa = lsa_size(c);
	if (v < 22807) {
		return lsa_barrier_units(q->lsaBarrierCount, lsa);
	}
	if (v < 23003) {
		int lsaBar = q->barrierCount > q->lsaBarrierCount ? q->barrierCount : q->lsaBarrierCount;
		int railBar = q->barrierCount > q->railGinBarrierCount ? q->barrierCount : q->railGinBarrierCount;
		uint32_t units = lsa_barrier_units(lsaBar, lsa);
		if (v < 22907) {
			units += (uint32_t)((railBar * 4 * 4 + 127) / 128);
		}
		return units;
	}
	return lsa_barrier_units(q->lsaBarrierCount, lsa) + lsa_barrier_units(q->barrierCount, lsa);
}

// symmetric_support is NCCL's comm->symmetricSupport, which
// ncclDevCommCreate requires: symmetric memory turned on (NCCL_WIN_ENABLE)
// over cuMem (NCCL_CUMEM_ENABLE), and, before 2.28.7, at least 2 ranks on
// the node (2.27-2.28.3's ncclTransportCheckP2pType calls a node of one
// rank not "all direct P2P"; every fake rank is on one node). The H200
// showed the one-rank refusal on NCCL 2.28.3.
static int symmetric_support(const struct comm *c) {
	if (knob.no_symmetric || knob.win_disabled || knob.cumem_disabled) {
		return 0;
	}
	return version() >= 22807 || c->nranks >= 2;
}

// ncclDevCommCreate writes rank, nRanks, lsaRank and lsaSize into the
// device communicator in the layout its version calls for, when the
// operation completes.
EXPORT int ncclDevCommCreate(void *comm, const void *rawreqs, void *out) {
	const char *fn = "ncclDevCommCreate";
	ENTER("ncclDevCommCreate");
	int v = version();
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return group_error_check(r);
	}
	if (!rawreqs) {
		return group_error_check(fail(ncclInvalidArgument, fn, "reqs argument is NULL"));
	}
	if (!out) {
		return group_error_check(fail(ncclInvalidArgument, fn, "outDevComm argument is NULL"));
	}
	const unsigned char *p = rawreqs;
	struct reqs q = {0};
	int entry = COMPAT_NONE;
	unsigned int declared = 0;
	if (v < 22902) { // 2.28.x: the library's own layout, no header
		if (v < 22807) {
			q.lsaMultimem = get_u8(p, 16);
			q.lsaBarrierCount = get_i32(p, 20);
		} else {
			q.lsaMultimem = get_u8(p, 16);
			q.barrierCount = get_i32(p, 20);
			q.lsaBarrierCount = get_i32(p, 24);
			q.railGinBarrierCount = get_i32(p, 28);
			q.lsaLLA2ABlockCount = get_i32(p, 32);
			q.lsaLLA2ASlotCount = get_i32(p, 36);
			q.ginForceEnable = get_u8(p, 40);
			q.ginContextCount = get_i32(p, 44);
			q.ginSignalCount = get_i32(p, 48);
			q.ginCounterCount = get_i32(p, 52);
		}
	} else {
		if (get_u32(p, 8) != API_MAGIC) {
			return group_error_check(fail(ncclInvalidUsage, fn, "Cannot create device communicator: "
						       "ncclDevCommRequirements_t argument must be initialized via "
						       "NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER"));
		}
		declared = get_u32(p, 12);
		if ((r = compat(declared, fn, &entry)) != ncclSuccess) {
			return group_error_check(r);
		}
		size_t size;
		memcpy(&size, p, sizeof size);
		if (v < 23000) { // struct assignment: the library's own size, whatever size says
			read_versioned(p, entry == COMPAT_22902 ? 72 : (v < 22907 ? 72 : 88), &q);
		} else {
			size_t own = reqs_size((unsigned int)v);
			if (size > own) {
				return group_error_check(fail(ncclInvalidArgument, fn, "size %zu exceeds the library's %zu bytes "
							       "(real NCCL overflows its heap buffer)", size, own));
			}
			if (size != reqs_size(declared)) {
				return group_error_check(fail(ncclInvalidArgument, fn, "size %zu is not the %zu bytes of version "
							       "%u's layout (real NCCL would misread it)", size,
							       reqs_size(declared), declared));
			}
			read_versioned(p, size, &q);
		}
		if (entry == COMPAT_22902 && v >= 22907) {
			if (q.ginForceEnable || q.ginSignalCount > 0 || q.ginCounterCount > 0) {
				return group_error_check(fail(ncclInvalidUsage, fn, "GIN resources cannot be requested with a "
							       "2.29.2 ncclDevCommRequirements_t"));
			}
			if (q.barrierCount > q.lsaBarrierCount) {
				q.lsaBarrierCount = q.barrierCount;
			}
			q.barrierCount = q.railGinBarrierCount = 0;
		} else if (entry == COMPAT_22907 && v >= 23000 && gin_requested(&q, v) &&
			   (q.ginConnectionType != 0 || q.ginForceEnable)) {
			return group_error_check(fail(ncclInvalidUsage, fn, "GIN resources cannot be requested with a 2.29.7 "
						       "ncclDevCommRequirements_t"));
		}
	}
	if (!symmetric_support(c)) {
		return group_error_check(fail(ncclInvalidUsage, fn, "Communicator does not support symmetric memory!"));
	}
	if ((r = ensure_ready(c, fn)) != ncclSuccess) {
		return group_error_check(r);
	}
	int gin_enabled = q.ginConnectionType != 0 || q.ginForceEnable;
	const unsigned char *res_head;
	memcpy(&res_head, p + (v < 22902 ? 0 : 16), sizeof res_head);
	int nodes_gin = node_gin(res_head, v);
	if (nodes_gin < 0) {
		return group_error_check(fail(ncclInvalidArgument, fn, "resourceRequirementsList has a cycle"));
	}
	if (v >= 22907 && (gin_requested(&q, v) || nodes_gin) && !gin_enabled) {
		return group_error_check(fail(ncclInvalidArgument, fn, "GIN resources requested but GIN is not enabled "
					       "(ginConnectionType NONE and ginForceEnable false)"));
	}
	if (entry == COMPAT_23100) {
		// NVIDIA's device API documentation: ginMinStride is "the minimum
		// value allowed for ginCustomStride"; CFT requested where not all
		// ranks support it fails (the fake has no CFT; the code is not
		// established).
		int minStride = knob.gin_conn == 1 ? 1 : lsa_size(c);
		if (q.ginConnectionType == 3 && q.ginCustomStride < minStride) {
			return group_error_check(fail(ncclInvalidArgument, fn, "ginCustomStride %d is below ginMinStride %d",
						       q.ginCustomStride, minStride));
		}
		if (q.cftCaps != 0 && !knob.cft) {
			return group_error_check(fail(ncclInvalidUsage, fn, "CFT requested (cftCaps %#x) but not all ranks "
						       "support CFT", q.cftCaps));
		}
		if ((q.cftCaps & 2) && !knob.multimem) {
			return group_error_check(fail(ncclInvalidArgument, fn, "CFT multicast support requested, but NVLS is "
						       "disabled or unsupported."));
		}
		// The logical endpoints are made during the call.
		c->le_uc |= (q.cftCaps & 1) != 0;
		c->le_mc |= (q.cftCaps & 2) != 0;
	}
	// The connection NCCL asks for (2.29.7 and later): ginForceEnable means
	// FULL whatever ginConnectionType says. The communicator's GIN support
	// (globalGinSupport) is FULL where FAKE_NCCL_GIN_TYPE is set, RAIL
	// where only FAKE_NCCL_RAILED_GIN_TYPE is (its properties: GIN type
	// NONE, a railed GIN type), else NONE; before 2.29.7 only
	// FAKE_NCCL_GIN_TYPE counts.
	int requested = q.ginForceEnable ? 1 : q.ginConnectionType;
	int rail_only = v >= 22907 && knob.gin_type == 0 && knob.railed_gin_type != 0;
	if (gin_enabled && knob.gin_type == 0 && !rail_only) {
		// 2.29.7 and later (ncclDevrCommCreateInternal): ncclInvalidArgument.
		return group_error_check(fail(v >= 22907 ? ncclInvalidArgument : ncclInvalidUsage, fn,
					      "User requested GIN but not all ranks in the communicator support GIN "
					      "(FAKE_NCCL_GIN_TYPE=0)"));
	}
	if (rail_only && requested == 1) {
		return group_error_check(fail(ncclInvalidArgument, fn, "User requested GIN connection type "
					      "NCCL_GIN_CONNECTION_FULL but the communicator supports only "
					      "NCCL_GIN_CONNECTION_RAIL"));
	}
	// The device communicator: rank and nRanks first, then lsaRank and lsaSize.
	unsigned char dc[256] = {0};
	size_t n, off = 0;
	if (v < 22807) {
		n = 88;
	} else if (v < 22907 || entry == COMPAT_22902) {
		n = 200;
	} else if (v < 23000 || entry == COMPAT_22907) {
		n = 224;
	} else if (entry == COMPAT_23100) {
		// 2.31: the declared release's layout; the fake has one, of the
		// size its properties report (devCommRuntimeVersionSize, 256).
		// useRuntimeVersion: the library's own, stamped with its version.
		n = 256;
		put_i32(dc, 0, (int32_t)API_MAGIC);
		put_i32(dc, 4, q.useRuntimeVersion ? v : (int32_t)declared);
		put_i32(dc, 248, q.ginCustomStride); // where tests read what arrived
		put_i32(dc, 252, q.ginType);
		off = 8;
	} else {
		n = 240;
		put_i32(dc, 0, (int32_t)API_MAGIC);
		put_i32(dc, 4, (int32_t)declared);
		off = 8;
	}
	int ls = lsa_size(c);
	put_i32(dc, off + 0, c->rank);
	put_i32(dc, off + 4, c->nranks);
	put_i32(dc, off + 12, c->rank % ls);
	put_i32(dc, off + 16, ls);
	// The resource requirements (NCCL copies bufferSize, bufferAlign and
	// outBufferHandle of each node during the call, and writes each
	// handle when the job completes): handles are the resources' offsets
	// in the resource window, in units of 128 bytes
	// (ncclGetResourceBufferOffset), in list order after the buffers of
	// NCCL's own barriers (internal_buffer_units).
	struct action *acts = write_bytes(out, dc, n);
	const unsigned char *node;
	memcpy(&node, p + (v < 22902 ? 0 : 16), sizeof node);
	uint32_t handle = internal_buffer_units(&q, c, v);
	// GIN signals: the caller's ginSignalCount first (ids from 0), then
	// NCCL's own barriers', then each node's in list order.
	uint32_t signal = (uint32_t)(q.ginSignalCount + internal_gin_signals(&q, c, v));
	for (int i = 0; node; i++) {
		if (i == 1024) {
			drop_actions(acts);
			return group_error_check(fail(ncclInvalidArgument, fn, "resourceRequirementsList has a cycle"));
		}
		uint64_t bufferSize;
		void *outh, *nextNode;
		memcpy(&bufferSize, node + 8, 8);
		memcpy(&outh, node + 24, sizeof outh);
		memcpy(&nextNode, node, sizeof nextNode);
		if (outh) {
			acts = append(acts, write_bytes(outh, &handle, 4));
		}
		handle += (uint32_t)((bufferSize + 127) / 128);
		if (v >= 22807) {
			void *outsig;
			memcpy(&outsig, node + 40, sizeof outsig);
			if (outsig) {
				acts = append(acts, write_bytes(outsig, &signal, 4));
			}
			signal += (uint32_t)get_i32(node, 32);
		}
		node = nextNode;
	}
	// The team requirements (NCCL copies team, multimem and
	// outMultimemHandle): a multimem team gets a multicast object, whose
	// handle (a stand-in address) is written when the job completes.
	memcpy(&node, p + (v < 22902 ? 8 : 24), sizeof node);
	for (int i = 0; node; i++) {
		if (i == 1024) {
			drop_actions(acts);
			return group_error_check(fail(ncclInvalidArgument, fn, "teamRequirementsList has a cycle"));
		}
		void *outh, *nextNode;
		memcpy(&outh, node + 24, sizeof outh);
		memcpy(&nextNode, node, sizeof nextNode);
		if (node[20]) {
			if (!knob.multimem) {
				drop_actions(acts);
				return group_error_check(fail(ncclInvalidUsage, fn, "multimem requested for a team, not supported"));
			}
			if (outh) {
				uintptr_t mc = 0x6d630000000ull + ((uintptr_t)i << 20); // "mc"
				acts = append(acts, write_bytes(outh, &mc, sizeof mc));
			}
		}
		node = nextNode;
	}
	struct devcomm *d = calloc(1, sizeof *d);
	if (!d) {
		return group_error_check(fail(ncclSystemError, fn, "out of memory"));
	}
	*d = (struct devcomm){out, 1, c, NULL};
	pthread_mutex_lock(&mu);
	d->next = c->devcomms;
	c->devcomms = d;
	pthread_mutex_unlock(&mu);
	if ((r = group_join(c, fn)) != ncclSuccess) {
		return r;
	}
	return group_error_check(submit(c, fn, 1, knob.polls, async_fail(fn), acts));
}

EXPORT int ncclDevCommDestroy(void *comm, const void *devcomm) {
	const char *fn = "ncclDevCommDestroy";
	ENTER("ncclDevCommDestroy");
	struct comm *c;
	int r = comm_check(comm, fn, &c);
	if (r) {
		return r;
	}
	if (!devcomm) {
		return fail(ncclInvalidArgument, fn, "devComm argument is NULL");
	}
	if (version() >= 23000 && get_u32(devcomm, 0) == API_MAGIC) {
		int entry;
		if ((r = compat(get_u32(devcomm, 4), fn, &entry)) != ncclSuccess) {
			return r;
		}
	}
	pthread_mutex_lock(&mu);
	struct devcomm *d = c->devcomms;
	while (d && (d->addr != devcomm || !d->alive)) {
		d = d->next;
	}
	if (d) {
		d->alive = 0;
	}
	pthread_mutex_unlock(&mu);
	if (!d) {
		return fail(ncclInvalidArgument, fn, "devComm %p was not created on this communicator (or was destroyed)",
			    devcomm);
	}
	return ncclSuccess;
}
#endif

// ---------------------------------------------------------------------------
// Host-side teams (NCCL 2.28.3; src/nccl_device/core.cc, unchanged through
// 2.30.7 and STyGIANet/nccl 2.31.0a16). NCCL checks neither the
// communicator nor the rank: a bad communicator is dereferenced. The fake
// aborts there, so that a binding passing one is caught, and computes the
// ranks with the same formulas, out-of-range ranks included. The LSA teams
// split the communicator into FAKE_NCCL_LSA_TEAMS blocks of consecutive
// ranks (lsa_size).

#if SINCE(22803)
typedef struct {
	int nRanks, rank, stride;
} fake_team;

static struct comm *team_comm(void *comm, const char *fn) {
	pthread_once(&once, read_knobs);
	trace(fn);
	struct comm *c = lookup(comm);
	if (!c || c->dead) {
		fprintf(stderr, "fake: %s: %p is not a live communicator: real NCCL dereferences it\n", fn, comm);
		abort();
	}
	return c;
}

EXPORT fake_team ncclTeamWorld(void *comm) {
	struct comm *c = team_comm(comm, "ncclTeamWorld");
	fake_team t = {c->nranks, c->rank, 1};
	return t;
}

EXPORT fake_team ncclTeamLsa(void *comm) {
	struct comm *c = team_comm(comm, "ncclTeamLsa");
	fake_team t = {0, 0, 0};
	if (knob.devr_fail) {
		return t;
	}
	int n = lsa_size(c);
	t.nRanks = n;
	t.rank = c->rank % n;
	t.stride = 1;
	return t;
}

EXPORT fake_team ncclTeamRail(void *comm) {
	struct comm *c = team_comm(comm, "ncclTeamRail");
	fake_team t = {0, 0, 0};
	if (knob.devr_fail) {
		return t;
	}
	int n = lsa_size(c);
	t.nRanks = c->nranks / n;
	t.rank = c->rank / n;
	t.stride = n;
	return t;
}

EXPORT int ncclTeamRankToWorld(void *comm, fake_team team, int rank) {
	struct comm *c = team_comm(comm, "ncclTeamRankToWorld");
	return c->rank + (rank - team.rank) * team.stride;
}

EXPORT int ncclTeamRankToLsa(void *comm, fake_team team, int rank) {
	struct comm *c = team_comm(comm, "ncclTeamRankToLsa");
	if (knob.devr_fail) {
		return -1;
	}
	return c->rank % lsa_size(c) + (rank - team.rank) * team.stride;
}
#endif

// ---------------------------------------------------------------------------
// CFT (CUDA fabric logical endpoints, NCCL 2.31.2; NVIDIA's 2.31.2
// src/nccl_device/core.cc and src/cft_dev_runtime.cc). The flat CFT team
// has cftSize ranks: the LSA team's size where the GPUs and the CUDA build
// and driver (13.3) support logical endpoints, else 1 (this rank alone);
// the multimem CFT team likewise (cftMcSize). The rank in them is taken as
// rank % size, as the LSA team's (the line that sets it is not in the
// sources read). The hierarchical teams are ncclTeamOuterFactor(flat,
// inner size): an inner size above the flat size gives an empty team. An
// unknown mode, or a failed device-runtime init, gives {0, 0, 0}.
//
// The logical endpoints (LEs): the unicast ones of the flat team exist
// once a device communicator with NCCL_CFT is made, or from the start on a
// communicator made with hostCftMode Enable or Fallback (the fake's
// reading of NVIDIA's documentation: "set hostCftMode ... to query CFT
// endpoint information from host code before creating a CFT-enabled
// device communicator"); the multicast one is made by the first
// ncclGetMultimemDeviceLeInfo (NCCL then needs NVLS: FAKE_NCCL_MULTIMEM)
// if no device communicator with NCCL_CFT_MULTIMEM made it. Ids: unicast
// FAKE_LE_BASE + flat rank, multicast FAKE_LE_MC; offsets the window's
// place in the communicator's symmetric range plus the offset, which NCCL
// does not check.
#if SINCE(23102)
enum { CFT_TEAM_FLAT, CFT_TEAM_HIER_MULTIMEM, CFT_TEAM_HIER_LSA };
enum { FAKE_LE_BASE = 0x100, FAKE_LE_MC = 0x800 };

static int cft_size(const struct comm *c) { return knob.cft ? lsa_size(c) : 1; }

static fake_team cft_flat(const struct comm *c) {
	int n = cft_size(c);
	fake_team t = {n, c->rank % n, 1};
	return t;
}

static fake_team team_cft(struct comm *c, int mode) {
	fake_team zero = {0, 0, 0};
	if (knob.devr_fail) {
		return zero;
	}
	fake_team flat = cft_flat(c);
	int inner;
	switch (mode) {
	case CFT_TEAM_FLAT:
		return flat;
	case CFT_TEAM_HIER_MULTIMEM:
		inner = cft_size(c); // cftMcSize
		break;
	case CFT_TEAM_HIER_LSA:
		inner = lsa_size(c);
		break;
	default:
		return zero;
	}
	fake_team t = {flat.nRanks / inner, flat.rank / inner, flat.stride * inner};
	return t;
}

EXPORT fake_team ncclTeamCft(void *comm, int mode) {
	return team_cft(team_comm(comm, "ncclTeamCft"), mode);
}

EXPORT fake_team ncclTeamCftMultimem(void *comm) {
	struct comm *c = team_comm(comm, "ncclTeamCftMultimem");
	fake_team zero = {0, 0, 0};
	return knob.devr_fail ? zero : cft_flat(c);
}

// le_window is the checks the three queries share: the pointers, the
// window, CFT support (gpuCftSupport).
static int le_window(void *win, const void *leId, const void *leOffset, const char *fn, struct window **w) {
	if (!win || !leId || !leOffset) {
		return fail(ncclInvalidArgument, fn, "%s argument is NULL", !win ? "window" : !leId ? "leId" : "leOffset");
	}
	if (!(*w = lookup_window(win))) {
		return fail(ncclInvalidArgument, fn, "Could not find communicator matching window %p", win);
	}
	if (!knob.cft) {
		return fail(ncclInvalidArgument, fn, "Using CFT query function without CFT support in the communicator.");
	}
	return ncclSuccess;
}

static int le_uc_made(const struct comm *c) {
	return c->le_uc || c->config.hostCftMode == 1 || c->config.hostCftMode == 3;
}

static int no_le(const char *fn) {
	return fail(ncclInvalidUsage, fn, "Querying CFT LE before LE creation. Create a CFT-enabled devComm first or "
					   "enable hostCftMode.");
}

EXPORT int ncclGetMultimemDeviceLeInfo(void *win, size_t offset, uint32_t *leId, size_t *leOffset) {
	const char *fn = "ncclGetMultimemDeviceLeInfo";
	ENTER("ncclGetMultimemDeviceLeInfo");
	struct window *w;
	int r = le_window(win, leId, leOffset, fn, &w);
	if (r) {
		return r;
	}
	if (!w->comm->le_mc) {
		if (!knob.multimem) {
			return fail(ncclInvalidArgument, fn, "CFT multicast support requested, but NVLS is disabled or unsupported.");
		}
		w->comm->le_mc = 1;
	}
	*leId = FAKE_LE_MC;
	*leOffset = w->big_offset + offset;
	return ncclSuccess;
}

EXPORT int ncclGetCftDeviceLeInfo(void *win, size_t offset, int peerCft, fake_team cftTeam, uint32_t *leId,
				  size_t *leOffset) {
	const char *fn = "ncclGetCftDeviceLeInfo";
	ENTER("ncclGetCftDeviceLeInfo");
	struct window *w;
	int r = le_window(win, leId, leOffset, fn, &w);
	if (r) {
		return r;
	}
	if (!le_uc_made(w->comm)) {
		return no_le(fn);
	}
	fake_team flat = cft_flat(w->comm);
	*leId = (uint32_t)(FAKE_LE_BASE + flat.rank + (peerCft - cftTeam.rank) * cftTeam.stride);
	*leOffset = w->big_offset + offset;
	return ncclSuccess;
}

EXPORT int ncclGetPeerDeviceLeInfo(void *win, size_t offset, int peerWorld, uint32_t *leId, size_t *leOffset) {
	const char *fn = "ncclGetPeerDeviceLeInfo";
	ENTER("ncclGetPeerDeviceLeInfo");
	struct window *w;
	int r = le_window(win, leId, leOffset, fn, &w);
	if (r) {
		return r;
	}
	const struct comm *c = w->comm;
	fake_team flat = cft_flat(c);
	int start = c->rank - flat.rank;
	if (peerWorld < start || peerWorld >= start + flat.nRanks) {
		return fail(ncclInvalidArgument, fn, "Peer %d is not within the flat CFT team boundaries [%d, %d).", peerWorld,
			    start, start + flat.nRanks);
	}
	if (!le_uc_made(c)) {
		return no_le(fn);
	}
	*leId = (uint32_t)(FAKE_LE_BASE + flat.rank + (peerWorld - c->rank));
	*leOffset = w->big_offset + offset;
	return ncclSuccess;
}
#endif

// ---------------------------------------------------------------------------
// The parameter API (NCCL 2.30.3; src/param/c_api.cc of 2.30.7). The
// registry holds the parameters declared with DEFINE_NCCL_PARAM in 2.30.7
// (keys are whole environment variable names), plus FAKE_NCCL_PARAMS. A
// value is the environment variable's, else the default, read at each call.
// Results returned through pointers live in thread-local storage.

#if SINCE(23003)
enum { PT_I8 = 1, PT_I16, PT_I32, PT_I64, PT_U8, PT_U16, PT_U32, PT_U64, PT_BOOL, PT_CSTR, PT_RAW };

struct fparam {
	char key[64];
	int type;
	int published;
	char def[64];
	int null_default; // a const char* parameter whose default is NULL
};

static struct fparam fparams[48];
static int nfparams;
static pthread_once_t params_once = PTHREAD_ONCE_INIT;

static void add_param(const char *key, int type, int published, const char *def) {
	if (nfparams >= (int)(sizeof fparams / sizeof fparams[0])) {
		return;
	}
	struct fparam *p = &fparams[nfparams++];
	snprintf(p->key, sizeof p->key, "%s", key);
	p->type = type;
	p->published = published;
	p->null_default = def == NULL;
	snprintf(p->def, sizeof p->def, "%s", def ? def : "");
}

static void init_params(void) {
	pthread_once(&once, read_knobs);
	// 2.30.7's registry (src/debug.cc, src/param/param.cc).
	add_param("NCCL_DEBUG", PT_RAW, 1, "");
	add_param("NCCL_DEBUG_SUBSYS", PT_U64, 1, "259"); // INIT|BOOTSTRAP|ENV as a number
	add_param("NCCL_WARN_ENABLE_DEBUG_INFO", PT_BOOL, 0, "0");
	add_param("NCCL_DEBUG_TIMESTAMP_LEVELS", PT_U32, 1, "4");
	add_param("NCCL_DEBUG_TIMESTAMP_FORMAT", PT_CSTR, 1, "[%F %T] ");
	add_param("NCCL_DEBUG_FILE", PT_CSTR, 1, NULL);
	add_param("NCCL_SET_THREAD_NAME", PT_BOOL, 1, "0");
	add_param("NCCL_PARAM_DUMP_ALL", PT_BOOL, 0, "0");
	add_param("NCCL_NO_CACHE", PT_CSTR, 0, NULL);
	// FAKE_NCCL_PARAMS=KEY:type[:private]=default,...
	static const char *const names[] = {"", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool", "str"};
	char buf[1024];
	copy_env(buf, sizeof buf, "FAKE_NCCL_PARAMS");
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		char *colon = strchr(tok, ':');
		if (!eq || !colon || colon > eq) {
			continue;
		}
		*eq = 0;
		*colon = 0;
		char *type = colon + 1;
		int published = 1;
		char *priv = strchr(type, ':');
		if (priv) {
			*priv = 0;
			published = strcmp(priv + 1, "private") != 0;
		}
		for (int t = PT_I8; t <= PT_CSTR; t++) {
			if (strcmp(type, names[t]) == 0) {
				add_param(tok, t, published, eq + 1);
			}
		}
	}
}

static struct fparam *find_param(const char *key) {
	pthread_once(&params_once, init_params);
	for (int i = 0; i < nfparams; i++) {
		if (strcmp(fparams[i].key, key) == 0) {
			return &fparams[i];
		}
	}
	return NULL;
}

static struct fparam *param_handle(void *h) {
	pthread_once(&params_once, init_params);
	for (int i = 0; i < nfparams; i++) {
		if (h == &fparams[i]) {
			return &fparams[i];
		}
	}
	return NULL;
}

// param_text is the value as text: the environment's, else the default;
// NULL for a const char* parameter without either.
static const char *param_text(const struct fparam *p) {
	const char *env = getenv(p->key);
	if (env && *env) {
		return env;
	}
	return p->null_default ? NULL : p->def;
}

// NCCL_DEBUG is an enum (ncclDebugLogLevel, 4 bytes) parsed by name.
static int debug_level(const char *s) {
	static const char *const levels[] = {"VERSION", "WARN", "INFO", "ABORT", "TRACE"};
	for (int i = 0; s && i < 5; i++) {
		if (strcasecmp(s, levels[i]) == 0) {
			return i + 1;
		}
	}
	return 0;
}

// param_bits writes the value's bytes (the parameter's C type) to out and
// returns their count.
static int param_bits(const struct fparam *p, void *out) {
	const char *s = param_text(p);
	long long i = s ? strtoll(s, NULL, 0) : 0;
	unsigned long long u = s ? strtoull(s, NULL, 0) : 0;
	switch (p->type) {
	case PT_I8: *(int8_t *)out = (int8_t)i; return 1;
	case PT_I16: *(int16_t *)out = (int16_t)i; return 2;
	case PT_I32: *(int32_t *)out = (int32_t)i; return 4;
	case PT_I64: *(int64_t *)out = (int64_t)i; return 8;
	case PT_U8: *(uint8_t *)out = (uint8_t)u; return 1;
	case PT_U16: *(uint16_t *)out = (uint16_t)u; return 2;
	case PT_U32: *(uint32_t *)out = (uint32_t)u; return 4;
	case PT_U64: *(uint64_t *)out = (uint64_t)u; return 8;
	case PT_BOOL: *(uint8_t *)out = (s && (strcmp(s, "1") == 0 || strcasecmp(s, "true") == 0)) ? 1 : 0; return 1;
	case PT_RAW: *(int32_t *)out = debug_level(s); return 4;
	}
	return 0;
}

// param_string is the value as ncclParamGetParameter and the dump print it.
static void param_string(const struct fparam *p, char *buf, size_t n) {
	const char *s = param_text(p);
	unsigned char bits[8] = {0};
	switch (p->type) {
	case PT_CSTR: snprintf(buf, n, "%s", s ? s : ""); return;
	case PT_RAW: {
		static const char *const levels[] = {"", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};
		snprintf(buf, n, "%s", levels[debug_level(s)]);
		return;
	}
	case PT_BOOL: param_bits(p, bits); snprintf(buf, n, "%s", bits[0] ? "1" : "0"); return;
	case PT_I8: case PT_I16: case PT_I32: case PT_I64: {
		long long v = 0;
		int k = param_bits(p, bits);
		if (k == 1) v = *(int8_t *)bits;
		if (k == 2) v = *(int16_t *)bits;
		if (k == 4) v = *(int32_t *)bits;
		if (k == 8) v = *(int64_t *)bits;
		snprintf(buf, n, "%lld", v);
		return;
	}
	default: {
		unsigned long long v = 0;
		int k = param_bits(p, bits);
		if (k == 1) v = *(uint8_t *)bits;
		if (k == 2) v = *(uint16_t *)bits;
		if (k == 4) v = *(uint32_t *)bits;
		if (k == 8) v = *(uint64_t *)bits;
		snprintf(buf, n, "%llu", v);
	}
	}
}

EXPORT int ncclParamBind(void **out, const char *key) {
	ENTER("ncclParamBind");
	if (!out || !key) {
		return ncclInvalidArgument;
	}
	struct fparam *p = find_param(key);
	if (!p) {
		return ncclInvalidArgument; // "PARAM: key ... not found in registry" (INFO only)
	}
	*out = p;
	return ncclSuccess;
}

#define TYPED_GETTER(suffix, ctype, tid)                            \
	EXPORT int ncclParamGet##suffix(void *h, ctype *out) {      \
		ENTER("ncclParamGet" #suffix);                      \
		struct fparam *p = param_handle(h);                 \
		if (!p || !out || p->type != (tid)) {               \
			return ncclInvalidArgument;                 \
		}                                                   \
		param_bits(p, out);                                 \
		return ncclSuccess;                                 \
	}
TYPED_GETTER(I8, int8_t, PT_I8)
TYPED_GETTER(I16, int16_t, PT_I16)
TYPED_GETTER(I32, int32_t, PT_I32)
TYPED_GETTER(I64, int64_t, PT_I64)
TYPED_GETTER(U8, uint8_t, PT_U8)
TYPED_GETTER(U16, uint16_t, PT_U16)
TYPED_GETTER(U32, uint32_t, PT_U32)
TYPED_GETTER(U64, uint64_t, PT_U64)
#undef TYPED_GETTER

static __thread char str_result[1024];

EXPORT int ncclParamGetStr(void *h, const char **out) {
	ENTER("ncclParamGetStr");
	struct fparam *p = param_handle(h);
	if (!p || !out || p->type != PT_CSTR) {
		return ncclInvalidArgument;
	}
	const char *s = param_text(p);
	snprintf(str_result, sizeof str_result, "%s", s ? s : "");
	*out = str_result;
	return ncclSuccess;
}

// ncclParamGet: the raw bytes; a string with its NUL. maxLen too small (or
// not positive) is ncclInvalidArgument with *len = 0.
EXPORT int ncclParamGet(void *h, void *out, int maxLen, int *len) {
	ENTER("ncclParamGet");
	struct fparam *p = param_handle(h);
	if (!p || !out || !len || maxLen <= 0) {
		return ncclInvalidArgument;
	}
	unsigned char bits[8];
	const void *src = bits;
	int n;
	if (p->type == PT_CSTR) {
		const char *s = param_text(p);
		src = s ? s : "";
		n = (int)strlen(src) + 1;
	} else {
		n = param_bits(p, bits);
	}
	if (n > maxLen) {
		*len = 0;
		return ncclInvalidArgument;
	}
	memcpy(out, src, (size_t)n);
	*len = n;
	return ncclSuccess;
}

static __thread char parameter_result[1024];

EXPORT int ncclParamGetParameter(const char *key, const char **value, int *valueLen) {
	ENTER("ncclParamGetParameter");
	if (!key || !value || !valueLen) {
		return ncclInvalidArgument;
	}
	struct fparam *p = find_param(key);
	if (!p) {
		*value = NULL;
		*valueLen = 0;
		return ncclInvalidArgument;
	}
	param_string(p, parameter_result, sizeof parameter_result);
	*value = parameter_result;
	*valueLen = (int)strlen(parameter_result);
	return ncclSuccess;
}

// dump_all is NCCL_PARAM_DUMP_ALL: private keys are listed too.
static int dump_all(void) {
	struct fparam *p = find_param("NCCL_PARAM_DUMP_ALL");
	unsigned char b = 0;
	if (p) {
		param_bits(p, &b);
	}
	return b;
}

static __thread const char *key_table[48];

EXPORT int ncclParamGetAllParameterKeys(const char ***table, int *tableLen) {
	ENTER("ncclParamGetAllParameterKeys");
	if (!table || !tableLen) {
		return ncclInvalidArgument;
	}
	int all = dump_all(), n = 0;
	for (int i = 0; i < nfparams; i++) {
		if (all || fparams[i].published) {
			key_table[n++] = fparams[i].key;
		}
	}
	*table = key_table;
	*tableLen = n;
	return ncclSuccess;
}

EXPORT void ncclParamDumpAll(void) {
	pthread_once(&once, read_knobs);
	trace("ncclParamDumpAll");
	int all = dump_all();
	static const char *const types[] = {"", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
					    "uint32_t", "uint64_t", "bool", "const char*", "ncclDebugLogLevel"};
	printf("=== ncclParam Registry Dump ===\n");
	for (int i = 0; i < nfparams; i++) {
		struct fparam *p = &fparams[i];
		if (!all && !p->published) {
			continue;
		}
		char cur[256];
		param_string(p, cur, sizeof cur);
		printf("%s (%s) [%s] \n    Current value=%s set_by=%s default=%s\n    Accepted value: \n\n", p->key,
		       types[p->type], p->published ? "" : "Private", cur[0] ? cur : "<unset>",
		       getenv(p->key) ? "env" : "default", p->def[0] ? p->def : "<unset>");
	}
}
#endif

// ---------------------------------------------------------------------------
// Per-collective configuration (2.31: STyGIANet/nccl 2.31.0a16
// src/config/collconfig.cc and src/collectives.cc; the layouts of nccl4py's
// bindings of 2.31.2 and NVIDIA's 2.32 documentation). ncclCollConfig_t:
// size 0, magic 8, version 12, ext 16, minCTAs 24, maxCTAs 28, nvlsCTAs 32,
// cgaClusterSize 36 (40 bytes in 2.31.0); algSelection 40,
// forceAlgSelection 48, CTAPolicy 52, userProfilerTag 56 (64 bytes in
// 2.31.2); launchCompletionEvent 64 (72 bytes in 2.32.3). A NULL config is
// the plain collective; a size below the first layout's or a wrong magic is
// ncclInvalidArgument; a config declaring the library's version or older is
// copied for its own size, unclamped (a larger size would overflow NCCL's
// copy: the fake fails the call instead, so tests see it), a newer one for
// the library's size.

#if SINCE(23100)
static size_t collconfig_size(int v) {
	if (v >= 23203) return 72;
	if (v >= 23102) return 64;
	return 40;
}

// coll_config_log writes, to FAKE_NCCL_LOG, what the library read of a
// valid config: "collconfig <fn> size=S version=V minCTAs=... alg=<s|NULL>
// force=F cta=P tag=T event=E ext=[vendor:option:int:str,...]", as NCCL
// copies it (config->size bytes for a version not newer than its own, else
// its own size) over NCCL_COLLCONFIG_INITIALIZER; fields past the library's
// layout print as "-". Each ext entry prints vendor:option:value (the 8
// bytes of the union, in hex) and, for a negative option (a convention of
// the tests: the fake cannot tell the union's member), :string.
static void coll_config_log(const void *cfg, const char *fn) {
	if (knob.log_fd < 0) {
		return;
	}
	unsigned char c[72];
	int32_t undef = INT32_MIN;
	memset(c, 0, sizeof c);
	for (int off = 24; off < 40; off += 4) memcpy(c + off, &undef, 4);
	int32_t one = 1;
	memcpy(c + 48, &one, 4);
	memcpy(c + 52, &undef, 4);
	size_t size, lib = collconfig_size(version());
	memcpy(&size, cfg, sizeof size);
	size_t n = (int)get_u32(cfg, 12) <= version() ? size : lib;
	memcpy(c, cfg, n < sizeof c ? n : sizeof c);
	char line[4096];
	int k = snprintf(line, sizeof line, "collconfig %s size=%zu version=%u minCTAs=%d maxCTAs=%d nvlsCTAs=%d cga=%d", fn,
			 size, get_u32(c, 12), get_i32(c, 24), get_i32(c, 28), get_i32(c, 32), get_i32(c, 36));
	if (lib >= 64) {
		const char *alg;
		uint64_t tag;
		memcpy(&alg, c + 40, sizeof alg);
		memcpy(&tag, c + 56, 8);
		k += snprintf(line + k, sizeof line - (size_t)k, " alg=%s force=%d cta=%d tag=%llu", alg ? alg : "NULL",
			      get_i32(c, 48), get_i32(c, 52), (unsigned long long)tag);
	} else {
		k += snprintf(line + k, sizeof line - (size_t)k, " alg=- force=- cta=- tag=-");
	}
	if (lib >= 72) {
		uintptr_t ev;
		memcpy(&ev, c + 64, sizeof ev);
		k += snprintf(line + k, sizeof line - (size_t)k, " event=%#lx", (unsigned long)ev);
	} else {
		k += snprintf(line + k, sizeof line - (size_t)k, " event=-");
	}
	k += snprintf(line + k, sizeof line - (size_t)k, " ext=[");
	const unsigned char *e;
	memcpy(&e, c + 16, sizeof e);
	for (int i = 0; e && i < 64 && k < (int)sizeof line - 256; i++) {
		const unsigned char *next;
		memcpy(&next, e, sizeof next);
		uint64_t val;
		memcpy(&val, e + 16, 8);
		k += snprintf(line + k, sizeof line - (size_t)k, "%s%d:%d:%#llx", i ? "," : "", get_i32(e, 8),
			      get_i32(e, 12), (unsigned long long)val);
		if (get_i32(e, 12) < 0 && val) { // the tests' convention: a negative option holds a string
			k += snprintf(line + k, sizeof line - (size_t)k, ":%.200s", (const char *)(uintptr_t)val);
		}
		e = next;
	}
	k += snprintf(line + k, sizeof line - (size_t)k, "]\n");
	log_write(line, k, sizeof line);
}

// NCCL copies a config struct but not what its pointers reach, and plans
// a group's work when the group ends: the fake reads each grouped config's
// algSelection again there and logs "collconfig-groupend <fn> alg=<s>",
// as NCCL could (a caller that freed it by then would show here).
static __thread struct {
	const char *fn, *alg;
} grouped_cfg[16];
static __thread int ngrouped_cfg;

static void coll_config_keep(const void *cfg, const char *fn) {
	size_t size;
	memcpy(&size, cfg, sizeof size);
	if (group_depth == 0 || ngrouped_cfg == 16 || collconfig_size(version()) < 64 || size < 48) {
		return;
	}
	const char *alg;
	memcpy(&alg, (const char *)cfg + 40, sizeof alg);
	grouped_cfg[ngrouped_cfg].fn = fn;
	grouped_cfg[ngrouped_cfg].alg = alg;
	ngrouped_cfg++;
}

static void coll_config_group_end(void) {
	for (int i = 0; i < ngrouped_cfg; i++) {
		const char *alg = grouped_cfg[i].alg;
		log_line("collconfig-groupend %s alg=%.200s\n", grouped_cfg[i].fn, alg ? alg : "NULL");
	}
	ngrouped_cfg = 0;
}

static int coll_config(const void *cfg, const char *fn) {
	if (!cfg) {
		return ncclSuccess;
	}
	size_t size;
	memcpy(&size, cfg, sizeof size);
	if (size < 40) {
		return fail(ncclInvalidArgument, fn, "ncclCollConfig_t size %zu too small (expected >= %zu)", size,
			    collconfig_size(version()));
	}
	if (get_u32(cfg, 8) != API_MAGIC) {
		return fail(ncclInvalidArgument, fn, "ncclCollConfig_t magic mismatch (got 0x%x, expected 0x%x)",
			    get_u32(cfg, 8), API_MAGIC);
	}
	if ((int)get_u32(cfg, 12) <= version() && size > collconfig_size(version())) {
		return fail(ncclInternalError, fn, "ncclCollConfig_t of %zu bytes declaring version %u overflows the "
			    "library's %zu-byte copy (real NCCL corrupts its stack here)", size, get_u32(cfg, 12),
			    collconfig_size(version()));
	}
	coll_config_log(cfg, fn);
	coll_config_keep(cfg, fn);
	return ncclSuccess;
}

#define COLLECTIVE_CONFIG(fn, cfg, ...)                            \
	ENTER(fn);                                                 \
	int rc_ = coll_config(cfg, fn);                            \
	if (rc_) {                                                 \
		return group_error_check(rc_);                     \
	}                                                          \
	return group_error_check(collective(fn, __VA_ARGS__))

EXPORT int ncclAllReduceConfig(const void *send, void *recv, size_t count, int dt, int op, void *comm, void *stream,
			       const void *cfg) {
	COLLECTIVE_CONFIG("ncclAllReduceConfig", cfg, C_ALLREDUCE, send, recv, count, dt, op, 0, comm, stream);
}

EXPORT int ncclBroadcastConfig(const void *send, void *recv, size_t count, int dt, int root, void *comm, void *stream,
			       const void *cfg) {
	COLLECTIVE_CONFIG("ncclBroadcastConfig", cfg, C_BROADCAST, send, recv, count, dt, 0, root, comm, stream);
}

EXPORT int ncclReduceConfig(const void *send, void *recv, size_t count, int dt, int op, int root, void *comm,
			    void *stream, const void *cfg) {
	COLLECTIVE_CONFIG("ncclReduceConfig", cfg, C_REDUCE, send, recv, count, dt, op, root, comm, stream);
}

EXPORT int ncclAllGatherConfig(const void *send, void *recv, size_t count, int dt, void *comm, void *stream,
			       const void *cfg) {
	COLLECTIVE_CONFIG("ncclAllGatherConfig", cfg, C_ALLGATHER, send, recv, count, dt, 0, 0, comm, stream);
}

EXPORT int ncclReduceScatterConfig(const void *send, void *recv, size_t count, int dt, int op, void *comm, void *stream,
				   const void *cfg) {
	COLLECTIVE_CONFIG("ncclReduceScatterConfig", cfg, C_REDUCESCATTER, send, recv, count, dt, op, 0, comm, stream);
}

EXPORT int ncclAlltoAllConfig(const void *send, void *recv, size_t count, int dt, void *comm, void *stream,
			      const void *cfg) {
	COLLECTIVE_CONFIG("ncclAlltoAllConfig", cfg, C_ALLTOALL, send, recv, count, dt, 0, 0, comm, stream);
}

EXPORT int ncclGatherConfig(const void *send, void *recv, size_t count, int dt, int root, void *comm, void *stream,
			    const void *cfg) {
	COLLECTIVE_CONFIG("ncclGatherConfig", cfg, C_GATHER, send, recv, count, dt, 0, root, comm, stream);
}

EXPORT int ncclScatterConfig(const void *send, void *recv, size_t count, int dt, int root, void *comm, void *stream,
			     const void *cfg) {
	COLLECTIVE_CONFIG("ncclScatterConfig", cfg, C_SCATTER, send, recv, count, dt, 0, root, comm, stream);
}
#endif

// ---------------------------------------------------------------------------
// ncclSetEncryption (NCCL 2.32.3: TLS for NCCL's socket traffic, in builds
// with TLS_BACKEND=OPENSSL3). The layout of ncclEncryptionConfig_t is not
// established, so the binding never calls it; the fake exports it so that
// the binding's gate can see it, and fails if it is ever called.
#if SINCE(23203)
EXPORT int ncclSetEncryption(const void *config) {
	ENTER("ncclSetEncryption");
	(void)config;
	return fail(ncclInternalError, "ncclSetEncryption", "the fake does not model ncclEncryptionConfig_t");
}
#endif

// ncclLLA2ACalcSlots (NCCL 2.28.3, src/nccl_device/ll_a2a.cc): maxElts
// times divUp(maxEltSize, 8), with no check.
#if SINCE(22803)
EXPORT int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
	ENTER("ncclLLA2ACalcSlots");
	return maxElts * ((maxEltSize + 7) / 8);
}
#endif

// ncclLsaBarrierCreateRequirement and ncclLLA2ACreateRequirement (NCCL
// 2.28.3, src/nccl_device/mem_barrier.cc and ll_a2a.cc): they zero the
// library's own ncclDevResourceRequirements_t (32 bytes in 2.28.3, 56 from
// 2.28.7), set the handle's count, the buffer's size and alignment, and
// point outBufferHandle at the handle's first word. No check.
#if SINCE(22803)
static void dev_resource(void *req, uint64_t size, uint64_t align, void *handle) {
	memset(req, 0, version() >= 22807 ? 56 : 32);
	memcpy((char *)req + 8, &size, 8);
	memcpy((char *)req + 16, &align, 8);
	memcpy((char *)req + 24, &handle, sizeof handle);
}

EXPORT int ncclLsaBarrierCreateRequirement(fake_team team, int nBarriers, void *outHandle, void *outReq) {
	ENTER("ncclLsaBarrierCreateRequirement");
	put_i32(outHandle, 4, nBarriers);
	dev_resource(outReq, (uint64_t)(3 * nBarriers + nBarriers * team.nRanks) * 4, 4, outHandle);
	return ncclSuccess;
}

EXPORT int ncclLLA2ACreateRequirement(int nBlocks, int nSlots, void *outHandle, void *outReq) {
	ENTER("ncclLLA2ACreateRequirement");
	put_i32(outHandle, 4, nSlots);
	dev_resource(outReq, (uint64_t)(nBlocks * (1 + 2 * nSlots) * 16), 16, outHandle);
	return ncclSuccess;
}
#endif

// ncclGinBarrierCreateRequirement (NCCL 2.28.7, src/nccl_device/
// gin_barrier.cc): the communicator is not used. The handle is {signal0,
// bufHandle} up to 2.29.3: a buffer of nBarriers × NCCL_GIN_MAX_CONTEXTS
// (4) words and nBarriers signals; {signal0, unused} from 2.29.7: no
// buffer, nBarriers × team.nRanks signals. outGinSignalStart points at
// signal0 (the node's bytes 40-47; ginSignalCount at 32).
#if SINCE(22807)
EXPORT int ncclGinBarrierCreateRequirement(void *comm, fake_team team, int nBarriers, void *outHandle, void *outReq) {
	ENTER("ncclGinBarrierCreateRequirement");
	(void)comm;
	if (version() < 22907) {
		dev_resource(outReq, (uint64_t)nBarriers * 4 * 4, 4, (char *)outHandle + 4);
		put_i32(outReq, 32, nBarriers);
	} else {
		memset(outReq, 0, 56);
		put_i32(outReq, 32, nBarriers * team.nRanks);
	}
	memcpy((char *)outReq + 40, &outHandle, sizeof outHandle);
	return ncclSuccess;
}
#endif
