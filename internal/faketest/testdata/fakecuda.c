// fakecuda.c: a fake CUDA driver (libcuda.so.1) for nccl4go's CPU-only tests.
//
// It implements every driver function of CAPI_CUDA_FUNCS and
// CAPI_CUDA_INTERNAL_FUNCS in internal/capi/shim.h with the driver's
// semantics and result codes, on the host:
//   - devices are numbered 0..FAKE_CUDA_DEVICES-1 (default 2); 0 or a negative
//     count means a driver without a device (cuInit returns
//     CUDA_ERROR_NO_DEVICE and everything after it CUDA_ERROR_NOT_INITIALIZED);
//   - each device has one primary context (a static object); the current
//     context is per thread, as in CUDA;
//   - device memory is host memory (aligned_alloc), tracked with its device,
//     so copies work with memcpy and unknown pointers are rejected instead of
//     crashing;
//   - streams and events are heap objects that are never freed (so a stale
//     handle is recognised as destroyed); work is synchronous, so streams and
//     events are always complete; an event records the time of cuEventRecord.
//
// Knobs (environment, read at cuInit):
//   FAKE_CUDA_DEVICES  number of devices (default 2; <= 0: none)
//   FAKE_CUDA_CC       compute capability as major*10+minor (default 90)
//   FAKE_CUDA_MEM      bytes of memory per device (default 80 GiB)
//   FAKE_CUDA_DRIVER   cuDriverGetVersion (default 13000)
//   FAKE_CUDA_EVENT_HANG n: every cuEventRecord after the n-th (counted in the
//                      process) records work that never completes: cuEventQuery
//                      returns CUDA_ERROR_NOT_READY for that event from then on
//                      (a hung kernel, for watchdog tests; cuEventSynchronize
//                      still returns at once, since a test cannot use a wait
//                      that never returns). Read at the first cuEventRecord.
//   FAKE_CUDA_WORK_HANG n: the work the fake NCCL enqueues (one per collective or
//                      point-to-point call, counted in the process through
//                      fakecuda_stream_device) after the n-th hangs its stream:
//                      every event recorded on that stream later never
//                      completes, as behind a kernel that never ends. Work
//                      on a capturing stream is captured, not counted.
//   FAKE_CUDA_STREAM_BUSY n: the work the fake NCCL enqueues on a stream
//                      (as FAKE_CUDA_WORK_HANG counts it) keeps the stream busy
//                      for the next n cuStreamQuery calls on it, which return
//                      CUDA_ERROR_NOT_READY (a long operation: waits that poll);
//                      cuStreamSynchronize waits it out at once.
//   FAKE_CUDA_QUERY_HANG 1: cuEventQuery never returns (a wedged driver, for
//                      the watchdog's heartbeat monitor).
//   FAKE_CUDA_CAPTURE_RULES 1: the driver's stream-capture rules, as measured
//                      on an H200 (driver 580, CUDA 13.0), for thread B
//                      querying or synchronizing an event or a stream while
//                      thread A captures:
//                        - an event last recorded inside a capture: 907
//                          (CUDA_ERROR_CAPTURED_EVENT), and that capture is
//                          invalidated (EndCapture returns 901);
//                        - anything else, while a capture is under way that
//                          the calling thread's capture interaction mode
//                          forbids (cuThreadExchangeStreamCaptureMode; global
//                          by default: a CaptureGlobal capture of another
//                          thread, or any non-relaxed capture of its own):
//                          900 (STREAM_CAPTURE_UNSUPPORTED), and that capture
//                          is invalidated; 0 under a CaptureThreadLocal or
//                          CaptureRelaxed capture of another thread, or when
//                          the calling thread's mode is relaxed.
//                      cuPointerGetAttribute is a query of the driver's
//                      own records, not of work, and is allowed (the GPU
//                      test checks the real driver agrees).
//   FAKE_CUDA_PAGEABLE_H2D 1: the driver's documented synchronization rules
//                      for synchronous copies ("API synchronization
//                      behavior"), which return before the copy lands:
//                      cuMemcpyHtoD_v2 from pageable memory returns once src is
//                      staged, and cuMemcpyDtoD_v2 and cuMemsetD8_v2 return at
//                      once; all are work of the legacy default stream. The staged bytes land
//                      in device memory only when the legacy stream is ordered
//                      or waited on: cuStreamSynchronize/cuStreamQuery of it,
//                      cuCtxSynchronize, a later operation on it or on a
//                      blocking stream (created without CU_STREAM_NON_BLOCKING),
//                      another synchronous copy or memset, or a free. Work on a
//                      non-blocking stream (all of nccl4go's) reads device
//                      memory as it is: without the legacy stream's copies
//                      (seen on an H200: an in-place Reduce read zeros for
//                      inputs just uploaded with cuMemcpyHtoD).
//
// Helpers for the fake NCCL (fakenccl.c), which finds them with
// dlopen(NCCL4GO_CUDA_LIBRARY, RTLD_NOLOAD) and dlsym, are the fakecuda_*
// functions at the end.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

// CUresult values used here.
enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_READY = 600,
};

#define MAX_DEVICES 16

// ---------------------------------------------------------------------------
// Global state.

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized;  // cuInit succeeded
static int ndevices;     // from FAKE_CUDA_DEVICES
static int cc = 90;      // compute capability major*10+minor
static size_t memory_per_device = (size_t)80 << 30;

static int env_int(const char *name, int def) {
	const char *s = getenv(name);
	return (s && *s) ? atoi(s) : def;
}

// A primary context. Its address is the CUcontext handle.
struct context {
	int device;
	int retained; // reference count of cuDevicePrimaryCtxRetain
};

static struct context contexts[MAX_DEVICES];

static __thread struct context *current; // the thread's current context
static __thread int capture_mode;        // the thread's capture interaction mode (0: global)
static int capture_rules;                // FAKE_CUDA_CAPTURE_RULES
static int pageable_h2d;                 // FAKE_CUDA_PAGEABLE_H2D
static void land(void);                  // FAKE_CUDA_PAGEABLE_H2D: the legacy stream's copies land
static int query_hang;                   // FAKE_CUDA_QUERY_HANG

static struct context *lookup_context(void *h) {
	for (int i = 0; i < ndevices; i++) {
		if (h == (void *)&contexts[i]) {
			return &contexts[i];
		}
	}
	return NULL;
}

static int valid_device(int dev) { return dev >= 0 && dev < ndevices; }

// ---------------------------------------------------------------------------
// Initialization, version, errors.

EXPORT int cuInit(unsigned int flags) {
	if (flags != 0) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	int n = env_int("FAKE_CUDA_DEVICES", 2);
	if (n > MAX_DEVICES) {
		n = MAX_DEVICES;
	}
	cc = env_int("FAKE_CUDA_CC", 90);
	capture_rules = env_int("FAKE_CUDA_CAPTURE_RULES", 0) == 1;
	query_hang = env_int("FAKE_CUDA_QUERY_HANG", 0) == 1;
	pageable_h2d = env_int("FAKE_CUDA_PAGEABLE_H2D", 0) == 1;
	const char *mem = getenv("FAKE_CUDA_MEM");
	if (mem && *mem) {
		memory_per_device = strtoull(mem, NULL, 10);
	}
	int r = CUDA_SUCCESS;
	if (n <= 0) {
		r = CUDA_ERROR_NO_DEVICE;
	} else {
		ndevices = n;
		for (int i = 0; i < n; i++) {
			contexts[i].device = i;
		}
		initialized = 1;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuDriverGetVersion(int *version) {
	if (!version) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	*version = env_int("FAKE_CUDA_DRIVER", 13000);
	return CUDA_SUCCESS;
}

static const struct {
	int code;
	const char *name, *text;
} errors[] = {
	{0, "CUDA_SUCCESS", "no error"},
	{1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	{100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{600, "CUDA_ERROR_NOT_READY", "device not ready"},
	{700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

// cuGetErrorName and cuGetErrorString work before cuInit. An unknown code
// gives CUDA_ERROR_INVALID_VALUE and NULL, as in the driver.
EXPORT int cuGetErrorName(int code, const char **name) {
	if (!name) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == code) {
			*name = errors[i].name;
			return CUDA_SUCCESS;
		}
	}
	*name = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuGetErrorString(int code, const char **text) {
	if (!text) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == code) {
			*text = errors[i].text;
			return CUDA_SUCCESS;
		}
	}
	*text = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

// ---------------------------------------------------------------------------
// Devices.

#define REQUIRE_INIT()                                   \
	do {                                             \
		if (!initialized) {                      \
			return CUDA_ERROR_NOT_INITIALIZED; \
		}                                        \
	} while (0)

EXPORT int cuDeviceGetCount(int *count) {
	REQUIRE_INIT();
	if (!count) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	*count = ndevices;
	return CUDA_SUCCESS;
}

EXPORT int cuDeviceGet(int *dev, int ordinal) {
	REQUIRE_INIT();
	if (!dev) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!valid_device(ordinal)) {
		return CUDA_ERROR_INVALID_DEVICE;
	}
	*dev = ordinal;
	return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetName(char *name, int len, int dev) {
	REQUIRE_INIT();
	if (!name || len <= 0) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!valid_device(dev)) {
		return CUDA_ERROR_INVALID_DEVICE;
	}
	snprintf(name, (size_t)len, "Fake GPU %d", dev);
	return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetPCIBusId(char *busid, int len, int dev) {
	REQUIRE_INIT();
	if (!busid || len <= 0) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!valid_device(dev)) {
		return CUDA_ERROR_INVALID_DEVICE;
	}
	snprintf(busid, (size_t)len, "00000000:%02X:00.0", dev);
	return CUDA_SUCCESS;
}

// cuDeviceGetUuid_v2: fa ce 00 00 ... 00 <dev>, which reads
// "GPU-face0000-0000-0000-0000-0000000000NN".
EXPORT int cuDeviceGetUuid_v2(unsigned char *uuid, int dev) {
	REQUIRE_INIT();
	if (!uuid) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!valid_device(dev)) {
		return CUDA_ERROR_INVALID_DEVICE;
	}
	memset(uuid, 0, 16);
	uuid[0] = 0xfa;
	uuid[1] = 0xce;
	uuid[15] = (unsigned char)dev;
	return CUDA_SUCCESS;
}

// CUdevice_attribute values the fake answers with something other than 0.
enum {
	ATTR_MAX_THREADS_PER_BLOCK = 1,
	ATTR_WARP_SIZE = 10,
	ATTR_MULTIPROCESSOR_COUNT = 16,
	ATTR_PCI_BUS_ID = 33,
	ATTR_PCI_DEVICE_ID = 34,
	ATTR_UNIFIED_ADDRESSING = 41,
	ATTR_PCI_DOMAIN_ID = 50,
	ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
	ATTR_COMPUTE_CAPABILITY_MINOR = 76,
	ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
	ATTR_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
	ATTR_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 104,
	ATTR_MAX = 150, // a bound above every attribute of CUDA 13.0
};

EXPORT int cuDeviceGetAttribute(int *value, int attr, int dev) {
	REQUIRE_INIT();
	if (!value || attr <= 0 || attr >= ATTR_MAX) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!valid_device(dev)) {
		return CUDA_ERROR_INVALID_DEVICE;
	}
	switch (attr) {
	case ATTR_MAX_THREADS_PER_BLOCK:
		*value = 1024;
		break;
	case ATTR_WARP_SIZE:
		*value = 32;
		break;
	case ATTR_MULTIPROCESSOR_COUNT:
		*value = 132;
		break;
	case ATTR_PCI_BUS_ID:
		*value = dev;
		break;
	case ATTR_COMPUTE_CAPABILITY_MAJOR:
		*value = cc / 10;
		break;
	case ATTR_COMPUTE_CAPABILITY_MINOR:
		*value = cc % 10;
		break;
	case ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
		*value = 232448;
		break;
	case ATTR_UNIFIED_ADDRESSING:
	case ATTR_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case ATTR_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
		*value = 1;
		break;
	default: // PCI device and domain 0, and every attribute not modelled
		*value = 0;
	}
	return CUDA_SUCCESS;
}

EXPORT int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
	REQUIRE_INIT();
	if (!bytes) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!valid_device(dev)) {
		return CUDA_ERROR_INVALID_DEVICE;
	}
	*bytes = memory_per_device;
	return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Contexts.

EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
	REQUIRE_INIT();
	if (!ctx) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!valid_device(dev)) {
		return CUDA_ERROR_INVALID_DEVICE;
	}
	pthread_mutex_lock(&mu);
	contexts[dev].retained++;
	pthread_mutex_unlock(&mu);
	*ctx = &contexts[dev];
	return CUDA_SUCCESS;
}

EXPORT int cuDevicePrimaryCtxRelease_v2(int dev) {
	REQUIRE_INIT();
	if (!valid_device(dev)) {
		return CUDA_ERROR_INVALID_DEVICE;
	}
	pthread_mutex_lock(&mu);
	int r = CUDA_SUCCESS;
	if (contexts[dev].retained > 0) {
		contexts[dev].retained--;
	} else {
		r = CUDA_ERROR_INVALID_CONTEXT;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuCtxSetCurrent(void *ctx) {
	REQUIRE_INIT();
	if (!ctx) {
		current = NULL;
		return CUDA_SUCCESS;
	}
	struct context *c = lookup_context(ctx);
	if (!c) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	current = c;
	return CUDA_SUCCESS;
}

EXPORT int cuCtxGetCurrent(void **ctx) {
	REQUIRE_INIT();
	if (!ctx) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	*ctx = current;
	return CUDA_SUCCESS;
}

EXPORT int cuCtxGetDevice(int *dev) {
	REQUIRE_INIT();
	if (!dev) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!current) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	*dev = current->device;
	return CUDA_SUCCESS;
}

// All work is synchronous but the legacy stream's staged copies
// (FAKE_CUDA_PAGEABLE_H2D), which land: synchronizing needs only a current
// context.
EXPORT int cuCtxSynchronize(void) {
	REQUIRE_INIT();
	if (!current) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	land();
	return CUDA_SUCCESS;
}

#define REQUIRE_CONTEXT()                                  \
	do {                                               \
		REQUIRE_INIT();                            \
		if (!current) {                            \
			return CUDA_ERROR_INVALID_CONTEXT; \
		}                                          \
	} while (0)

// ---------------------------------------------------------------------------
// Device memory: host memory, tracked.

struct allocation {
	uintptr_t base;
	size_t size;
	int device;
	int vmm; // made by fakecuda_alloc for ncclMemAlloc (cuMem-backed in real NCCL)
	int mapped; // a chunk mapped by cuMemMap into reserved address space (freed by cuMemUnmap)
	struct allocation *next;
};

static struct allocation *allocations;
static size_t used[MAX_DEVICES];

// FAKE_CUDA_PAGEABLE_H2D: copies queued on the legacy default stream that have
// not landed yet, oldest first (mu held to touch them).
struct staged {
	uintptr_t dst;
	size_t n;
	struct staged *next;
	unsigned char bytes[];
};

static struct staged *staged_head, **staged_tail = &staged_head;

// stage_locked queues n bytes of src (NULL: n bytes of value) for dst on the
// legacy stream; 0 when memory for the staging buffer is short.
static int stage_locked(uintptr_t dst, const void *src, unsigned char value, size_t n) {
	struct staged *c = malloc(sizeof *c + n);
	if (!c) {
		return 0;
	}
	c->dst = dst;
	c->n = n;
	c->next = NULL;
	if (src) {
		memcpy(c->bytes, src, n);
	} else {
		memset(c->bytes, value, n);
	}
	*staged_tail = c;
	staged_tail = &c->next;
	return 1;
}

// land_locked completes the legacy stream's staged copies, in order.
static void land_locked(void) {
	while (staged_head) {
		struct staged *c = staged_head;
		staged_head = c->next;
		memmove((void *)c->dst, c->bytes, c->n);
		free(c);
	}
	staged_tail = &staged_head;
}

static void land(void) {
	pthread_mutex_lock(&mu);
	land_locked();
	pthread_mutex_unlock(&mu);
}

// find_locked returns the live allocation holding [p, p+n), or NULL.
static struct allocation *find_locked(uintptr_t p, size_t n) {
	for (struct allocation *a = allocations; a; a = a->next) {
		if (p >= a->base && p < a->base + a->size) {
			if (n > a->size - (p - a->base)) {
				return NULL;
			}
			return a;
		}
	}
	return NULL;
}

static int alloc_locked(uintptr_t *out, size_t bytes, size_t align, int device, int vmm) {
	if (bytes > memory_per_device - used[device]) {
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	size_t rounded = (bytes + align - 1) / align * align;
	void *p = aligned_alloc(align, rounded);
	struct allocation *a = malloc(sizeof *a);
	if (!p || !a) {
		free(p);
		free(a);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memset(p, 0xcd, rounded); // "uninitialized" memory is not zero
	*a = (struct allocation){(uintptr_t)p, bytes, device, vmm, 0, allocations};
	allocations = a;
	used[device] += bytes;
	*out = (uintptr_t)p;
	return CUDA_SUCCESS;
}

static int free_locked(uintptr_t p, int vmm) {
	land_locked(); // freeing waits for the device
	for (struct allocation **pa = &allocations; *pa; pa = &(*pa)->next) {
		struct allocation *a = *pa;
		if (a->base == p) {
			if (a->vmm != vmm || a->mapped) {
				return CUDA_ERROR_INVALID_VALUE; // freed with the wrong allocator
			}
			*pa = a->next;
			used[a->device] -= a->size;
			free((void *)a->base);
			free(a);
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuMemAlloc_v2(uintptr_t *ptr, size_t bytes) {
	REQUIRE_CONTEXT();
	if (!ptr || bytes == 0) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	int r = alloc_locked(ptr, bytes, 256, current->device, 0);
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuMemFree_v2(uintptr_t ptr) {
	REQUIRE_CONTEXT();
	if (!ptr) {
		return CUDA_SUCCESS;
	}
	pthread_mutex_lock(&mu);
	int r = free_locked(ptr, 0);
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuMemGetInfo_v2(size_t *freeBytes, size_t *totalBytes) {
	REQUIRE_CONTEXT();
	if (!freeBytes || !totalBytes) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	*totalBytes = memory_per_device;
	*freeBytes = memory_per_device - used[current->device];
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

// check_range reports whether [p, p+n) is device memory, possibly of
// several chunks mapped side by side (cuMemMap); n == 0 is always fine.
static int check_range(uintptr_t p, size_t n) {
	pthread_mutex_lock(&mu);
	int ok = 1;
	while (n > 0) {
		struct allocation *a = find_locked(p, 1);
		if (!a) {
			ok = 0;
			break;
		}
		size_t k = a->size - (p - a->base);
		k = k < n ? k : n;
		p += k;
		n -= k;
	}
	pthread_mutex_unlock(&mu);
	return ok;
}

// ---------------------------------------------------------------------------
// Virtual memory management: cuMemAddressReserve takes host memory for the
// whole range; cuMemMap makes each mapped chunk an allocation of its own
// (what cuPointerGetAttribute's range attributes then report), backed by
// the reserved memory, so that chunks mapped side by side are contiguous.

enum { VMM_GRANULARITY = 2 << 20 };

struct phys {
	size_t size;
	int device;
	int alive;
};

struct reservation {
	uintptr_t base;
	size_t size;
	struct reservation *next;
};

static struct reservation *reservations;

EXPORT int cuMemGetAllocationGranularity(size_t *g, const void *prop, int option) {
	REQUIRE_INIT();
	(void)option;
	if (!g || !prop) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	*g = VMM_GRANULARITY;
	return CUDA_SUCCESS;
}

EXPORT int cuMemCreate(unsigned long long *handle, size_t size, const void *prop, unsigned long long flags) {
	REQUIRE_INIT();
	if (!handle || !prop || flags || size == 0 || size % VMM_GRANULARITY) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	int dev = ((const int *)prop)[3]; // location.id
	if (((const int *)prop)[0] != 1 || ((const int *)prop)[2] != 1 || dev < 0 || dev >= ndevices) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	struct phys *ph = calloc(1, sizeof *ph);
	if (!ph) {
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*ph = (struct phys){size, dev, 1};
	*handle = (unsigned long long)(uintptr_t)ph;
	return CUDA_SUCCESS;
}

EXPORT int cuMemRelease(unsigned long long handle) {
	REQUIRE_INIT();
	struct phys *ph = (struct phys *)(uintptr_t)handle;
	if (!ph || !ph->alive) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	ph->alive = 0; // never freed: a stale handle stays recognisable
	return CUDA_SUCCESS;
}

EXPORT int cuMemAddressReserve(uintptr_t *ptr, size_t size, size_t align, uintptr_t addr, unsigned long long flags) {
	REQUIRE_INIT();
	(void)addr;
	if (!ptr || size == 0 || size % VMM_GRANULARITY || flags) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	align = align > VMM_GRANULARITY ? align : VMM_GRANULARITY;
	void *p = aligned_alloc(align, size);
	struct reservation *rv = malloc(sizeof *rv);
	if (!p || !rv) {
		free(p);
		free(rv);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&mu);
	*rv = (struct reservation){(uintptr_t)p, size, reservations};
	reservations = rv;
	pthread_mutex_unlock(&mu);
	*ptr = (uintptr_t)p;
	return CUDA_SUCCESS;
}

EXPORT int cuMemAddressFree(uintptr_t ptr, size_t size) {
	REQUIRE_INIT();
	pthread_mutex_lock(&mu);
	int r = CUDA_ERROR_INVALID_VALUE;
	for (struct reservation **pr = &reservations; *pr; pr = &(*pr)->next) {
		struct reservation *rv = *pr;
		if (rv->base == ptr && rv->size == size && !find_locked(ptr, 1)) {
			*pr = rv->next;
			free((void *)rv->base);
			free(rv);
			r = CUDA_SUCCESS;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuMemMap(uintptr_t ptr, size_t size, size_t offset, unsigned long long handle, unsigned long long flags) {
	REQUIRE_INIT();
	struct phys *ph = (struct phys *)(uintptr_t)handle;
	if (!ph || !ph->alive || offset || flags || size != ph->size) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	int in = 0;
	for (struct reservation *rv = reservations; rv; rv = rv->next) {
		in |= ptr >= rv->base && ptr - rv->base <= rv->size && size <= rv->size - (ptr - rv->base);
	}
	int r = CUDA_ERROR_INVALID_VALUE;
	struct allocation *a = NULL;
	if (in && !find_locked(ptr, 1) && !find_locked(ptr + size - 1, 1) && (a = malloc(sizeof *a))) {
		*a = (struct allocation){ptr, size, ph->device, 0, 1, allocations};
		allocations = a;
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuMemSetAccess(uintptr_t ptr, size_t size, const void *desc, size_t count) {
	REQUIRE_INIT();
	if (!desc || count == 0) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	return check_range(ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuMemUnmap(uintptr_t ptr, size_t size) {
	REQUIRE_INIT();
	pthread_mutex_lock(&mu);
	int r = CUDA_ERROR_INVALID_VALUE;
	land_locked(); // unmapping waits for the device
	for (struct allocation **pa = &allocations; *pa;) {
		struct allocation *a = *pa;
		if (a->mapped && a->base >= ptr && a->base - ptr < size) {
			*pa = a->next;
			free(a);
			r = CUDA_SUCCESS;
			continue;
		}
		pa = &a->next;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

// ---------------------------------------------------------------------------
// Streams and events. Handles are never freed, so that a destroyed one is
// still recognised.

struct event;
// Capture state and rules (defined with the graphs; mu held).
static unsigned long long capturing_locked(void *stream);
static int capture_forbids_locked(unsigned long long captured);
static void event_on_stream_locked(struct event *e, void *stream, int device);

struct stream {
	int device;
	int alive;
	unsigned flags; // CU_STREAM_NON_BLOCKING (1) or not
	long busy; // FAKE_CUDA_STREAM_BUSY: cuStreamQuery calls left that return NOT_READY
	struct stream *next;
};

static struct stream *streams;

static struct stream *lookup_stream_locked(void *h) {
	for (struct stream *s = streams; s; s = s->next) {
		if ((void *)s == h) {
			return s;
		}
	}
	return NULL;
}

// check_stream: 0 (the legacy default stream) or a live stream. Work on
// either the legacy stream or a blocking stream is ordered after the legacy
// stream's work, so its staged copies land first.
static int check_stream(void *h) {
	pthread_mutex_lock(&mu);
	struct stream *s = h ? lookup_stream_locked(h) : NULL;
	int r = (!h || (s && s->alive)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	if (r == CUDA_SUCCESS && (!h || !(s->flags & 1))) {
		land_locked();
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuStreamCreate(void **stream, unsigned int flags) {
	REQUIRE_CONTEXT();
	if (!stream || (flags & ~1u)) { // CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING
		return CUDA_ERROR_INVALID_VALUE;
	}
	struct stream *s = calloc(1, sizeof *s);
	if (!s) {
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	s->device = current->device;
	s->alive = 1;
	s->flags = flags;
	pthread_mutex_lock(&mu);
	s->next = streams;
	streams = s;
	pthread_mutex_unlock(&mu);
	*stream = s;
	return CUDA_SUCCESS;
}

EXPORT int cuStreamDestroy_v2(void *stream) {
	REQUIRE_INIT();
	pthread_mutex_lock(&mu);
	struct stream *s = lookup_stream_locked(stream);
	int r = CUDA_ERROR_INVALID_HANDLE;
	if (s && s->alive) {
		s->alive = 0;
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

// stream_wait is cuStreamSynchronize and cuStreamQuery: the legacy default
// stream (0) needs a current context; under FAKE_CUDA_CAPTURE_RULES the
// capture rules apply.
static int stream_wait(void *stream) {
	REQUIRE_INIT();
	if (!stream && !current) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	int r = check_stream(stream);
	if (r == CUDA_SUCCESS) {
		pthread_mutex_lock(&mu);
		unsigned long long id = capture_rules ? capturing_locked(stream) : 0;
		// Waiting on a capturing stream is always forbidden: its own capture breaks.
		r = capture_forbids_locked(id);
		pthread_mutex_unlock(&mu);
	}
	return r;
}

// FAKE_CUDA_STREAM_BUSY (read at the first work noted); the legacy default
// streams of all devices share one count.
static long stream_busy = -1;
static long legacy_busy;

static long *busy_count_locked(void *stream) {
	if (!stream) {
		return &legacy_busy;
	}
	struct stream *s = lookup_stream_locked(stream);
	return s ? &s->busy : NULL;
}

EXPORT int cuStreamSynchronize(void *stream) {
	int r = stream_wait(stream);
	if (r == CUDA_SUCCESS) {
		pthread_mutex_lock(&mu);
		long *b = busy_count_locked(stream);
		if (b) {
			*b = 0;
		}
		pthread_mutex_unlock(&mu);
	}
	return r;
}

EXPORT int cuStreamQuery(void *stream) {
	int r = stream_wait(stream);
	if (r == CUDA_SUCCESS) {
		pthread_mutex_lock(&mu);
		long *b = busy_count_locked(stream);
		if (b && *b > 0) {
			--*b;
			r = CUDA_ERROR_NOT_READY;
		}
		pthread_mutex_unlock(&mu);
	}
	return r;
}

struct event {
	int device;
	unsigned int flags;
	int alive;
	int recorded;
	unsigned long long captured; // id of the capture its last record was made in; 0: none
	struct timespec when;
	struct event *next;
};

static struct event *events;

// FAKE_CUDA_EVENT_HANG (defined at the end of the file; mu held).
static void event_hang_note_locked(struct event *e);
static int event_hung_locked(struct event *e);
static void event_hang_add_locked(struct event *e);

enum { EVENT_DISABLE_TIMING = 0x2, EVENT_FLAGS = 0x1 | 0x2 | 0x4 };

static struct event *lookup_event_locked(void *h) {
	for (struct event *e = events; e; e = e->next) {
		if ((void *)e == h) {
			return e->alive ? e : NULL;
		}
	}
	return NULL;
}

EXPORT int cuEventCreate(void **event, unsigned int flags) {
	REQUIRE_CONTEXT();
	if (!event || (flags & ~(unsigned)EVENT_FLAGS)) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	struct event *e = calloc(1, sizeof *e);
	if (!e) {
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	e->device = current->device;
	e->flags = flags;
	e->alive = 1;
	pthread_mutex_lock(&mu);
	e->next = events;
	events = e;
	pthread_mutex_unlock(&mu);
	*event = e;
	return CUDA_SUCCESS;
}

EXPORT int cuEventDestroy_v2(void *event) {
	REQUIRE_INIT();
	pthread_mutex_lock(&mu);
	struct event *e = lookup_event_locked(event);
	if (e) {
		e->alive = 0;
	}
	pthread_mutex_unlock(&mu);
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// cuEventRecord: the stream must belong to the event's device (for the
// legacy default stream, the current context's).
EXPORT int cuEventRecord(void *event, void *stream) {
	REQUIRE_INIT();
	pthread_mutex_lock(&mu);
	int r = CUDA_SUCCESS;
	struct event *e = lookup_event_locked(event);
	struct stream *s = stream ? lookup_stream_locked(stream) : NULL;
	if (!e || (stream && (!s || !s->alive))) {
		r = CUDA_ERROR_INVALID_HANDLE;
	} else if (!stream && !current) {
		r = CUDA_ERROR_INVALID_CONTEXT;
	} else if ((s ? s->device : current->device) != e->device) {
		r = CUDA_ERROR_INVALID_HANDLE;
	} else if ((e->captured = capture_rules ? capturing_locked(stream) : 0) == 0) {
		if (!s || !(s->flags & 1)) {
			land_locked(); // the event follows the legacy stream's copies
		}
		clock_gettime(CLOCK_MONOTONIC, &e->when);
		e->recorded = 1;
		event_hang_note_locked(e);
		event_on_stream_locked(e, stream, s ? s->device : current->device);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuEventSynchronize(void *event) {
	REQUIRE_INIT();
	pthread_mutex_lock(&mu);
	struct event *e = lookup_event_locked(event);
	int r = !e ? CUDA_ERROR_INVALID_HANDLE : capture_forbids_locked(e->captured);
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuEventQuery(void *event) {
	REQUIRE_INIT();
	while (query_hang) {
		sleep(1);
	}
	pthread_mutex_lock(&mu);
	struct event *e = lookup_event_locked(event);
	int r = !e ? CUDA_ERROR_INVALID_HANDLE : capture_forbids_locked(e->captured);
	if (r == CUDA_SUCCESS && event_hung_locked(e)) {
		r = CUDA_ERROR_NOT_READY;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

// cuEventElapsedTime: both events recorded, with timing, on one device.
EXPORT int cuEventElapsedTime(float *ms, void *start, void *end) {
	REQUIRE_INIT();
	if (!ms) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	struct event *a = lookup_event_locked(start), *b = lookup_event_locked(end);
	int r = CUDA_SUCCESS;
	if (!a || !b || !a->recorded || !b->recorded || ((a->flags | b->flags) & EVENT_DISABLE_TIMING) ||
	    a->device != b->device) {
		r = CUDA_ERROR_INVALID_HANDLE;
	} else {
		double d = (double)(b->when.tv_sec - a->when.tv_sec) * 1e3 +
			   (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6;
		*ms = (float)d;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

// ---------------------------------------------------------------------------
// Copies and memset. Device addresses must lie in device memory, as the
// driver requires; host addresses are trusted.

EXPORT int cuMemsetD8_v2(uintptr_t dst, unsigned char value, size_t n) {
	REQUIRE_CONTEXT();
	if (!check_range(dst, n)) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (n && pageable_h2d) {
		pthread_mutex_lock(&mu);
		int ok = stage_locked(dst, NULL, value, n);
		pthread_mutex_unlock(&mu);
		return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (n) {
		land(); // the legacy stream's earlier copies first
		memset((void *)dst, value, n);
	}
	return CUDA_SUCCESS;
}

EXPORT int cuMemsetD8Async(uintptr_t dst, unsigned char value, size_t n, void *stream) {
	REQUIRE_CONTEXT();
	int r = check_stream(stream);
	if (r == CUDA_SUCCESS && !check_range(dst, n)) {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r == CUDA_SUCCESS && n) {
		memset((void *)dst, value, n);
	}
	return r;
}

EXPORT int cuMemcpyHtoD_v2(uintptr_t dst, const void *src, size_t n) {
	REQUIRE_CONTEXT();
	if (!check_range(dst, n) || (n && !src)) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (n && pageable_h2d) {
		pthread_mutex_lock(&mu);
		int ok = stage_locked(dst, src, 0, n);
		pthread_mutex_unlock(&mu);
		return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (n) {
		land();
		memcpy((void *)dst, src, n);
	}
	return CUDA_SUCCESS;
}

// htod is cuMemcpyHtoD_v2 as a stream's work: synchronous in the fake.
static int htod(uintptr_t dst, const void *src, size_t n) {
	if (!check_range(dst, n) || (n && !src)) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (n) {
		memcpy((void *)dst, src, n);
	}
	return CUDA_SUCCESS;
}

EXPORT int cuMemcpyDtoH_v2(void *dst, uintptr_t src, size_t n) {
	REQUIRE_CONTEXT();
	if (!check_range(src, n) || (n && !dst)) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (n) {
		land(); // the legacy stream's earlier copies first
		memcpy(dst, (const void *)src, n);
	}
	return CUDA_SUCCESS;
}

EXPORT int cuMemcpyDtoD_v2(uintptr_t dst, uintptr_t src, size_t n) {
	REQUIRE_CONTEXT();
	if (!check_range(dst, n) || !check_range(src, n)) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (n && pageable_h2d) {
		pthread_mutex_lock(&mu);
		land_locked(); // src as the legacy stream's earlier copies leave it
		int ok = stage_locked(dst, (const void *)src, 0, n);
		pthread_mutex_unlock(&mu);
		return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (n) {
		land();
		memmove((void *)dst, (const void *)src, n);
	}
	return CUDA_SUCCESS;
}

// dtod is cuMemcpyDtoD_v2 as a stream's work: synchronous in the fake.
static int dtod(uintptr_t dst, uintptr_t src, size_t n) {
	if (!check_range(dst, n) || !check_range(src, n)) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (n) {
		memmove((void *)dst, (const void *)src, n);
	}
	return CUDA_SUCCESS;
}

EXPORT int cuMemcpyHtoDAsync_v2(uintptr_t dst, const void *src, size_t n, void *stream) {
	REQUIRE_CONTEXT();
	int r = check_stream(stream);
	return r ? r : htod(dst, src, n);
}

EXPORT int cuMemcpyDtoHAsync_v2(void *dst, uintptr_t src, size_t n, void *stream) {
	REQUIRE_CONTEXT();
	int r = check_stream(stream);
	if (r == CUDA_SUCCESS && (!check_range(src, n) || (n && !dst))) {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r == CUDA_SUCCESS && n) {
		memcpy(dst, (const void *)src, n);
	}
	return r;
}

EXPORT int cuMemcpyDtoDAsync_v2(uintptr_t dst, uintptr_t src, size_t n, void *stream) {
	REQUIRE_CONTEXT();
	int r = check_stream(stream);
	return r ? r : dtod(dst, src, n);
}

// CUpointer_attribute values answered.
enum {
	PTR_ATTR_CONTEXT = 1,
	PTR_ATTR_MEMORY_TYPE = 2,
	PTR_ATTR_DEVICE_POINTER = 3,
	PTR_ATTR_DEVICE_ORDINAL = 9,
	PTR_ATTR_RANGE_START_ADDR = 11,
	PTR_ATTR_RANGE_SIZE = 12,
};

EXPORT int cuPointerGetAttribute(void *data, int attr, uintptr_t ptr) {
	REQUIRE_INIT();
	if (!data) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	struct allocation *a = find_locked(ptr, 1);
	struct allocation found = a ? *a : (struct allocation){0};
	pthread_mutex_unlock(&mu);
	if (!a) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	switch (attr) {
	case PTR_ATTR_CONTEXT:
		*(void **)data = &contexts[found.device];
		break;
	case PTR_ATTR_MEMORY_TYPE:
		*(unsigned int *)data = 2; // CU_MEMORYTYPE_DEVICE
		break;
	case PTR_ATTR_DEVICE_POINTER:
		*(uintptr_t *)data = ptr;
		break;
	case PTR_ATTR_DEVICE_ORDINAL:
		*(int *)data = found.device;
		break;
	case PTR_ATTR_RANGE_START_ADDR:
		*(uintptr_t *)data = found.base;
		break;
	case PTR_ATTR_RANGE_SIZE:
		*(size_t *)data = found.size;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------
// Helpers for the fake NCCL.

// fakecuda_current_device is the device of the calling thread's current
// context, or -1 without one.
EXPORT int fakecuda_current_device(void) { return current ? current->device : -1; }

// fakecuda_compute_capability is major*10+minor of every device.
EXPORT int fakecuda_compute_capability(void) { return cc; }

// fakecuda_memory looks up [p, p+n): it returns 1 and fills the outputs when
// the range is device memory (vmm: allocated by fakecuda_alloc), else 0.
EXPORT int fakecuda_memory(uintptr_t p, size_t n, int *device, int *vmm, uintptr_t *base, size_t *size) {
	pthread_mutex_lock(&mu);
	struct allocation *a = find_locked(p, n ? n : 1);
	if (a) {
		if (device) {
			*device = a->device;
		}
		if (vmm) {
			*vmm = a->vmm;
		}
		if (base) {
			*base = a->base;
		}
		if (size) {
			*size = a->size;
		}
	}
	pthread_mutex_unlock(&mu);
	return a != NULL;
}

// fakecuda_stream_device is the device of a live stream, -1 for the legacy
// default stream (0), or -2 for an unknown or destroyed stream.
// The fake NCCL calls it once per collective or point-to-point call: it is
// the work FAKE_CUDA_WORK_HANG counts.
static void work_note_locked(void *stream, int device);

EXPORT int fakecuda_stream_device(void *stream) {
	pthread_mutex_lock(&mu);
	struct stream *s = stream ? lookup_stream_locked(stream) : NULL;
	int d = !stream ? -1 : (s && s->alive) ? s->device : -2;
	if (d != -2 && (!s || !(s->flags & 1))) {
		land_locked(); // work on the legacy or a blocking stream follows its copies
	}
	if (d != -2) {
		work_note_locked(stream, d); // the legacy default streams of all devices count as one
	}
	pthread_mutex_unlock(&mu);
	return d;
}

// fakecuda_alloc allocates "cuMem" memory on the current device, aligned to
// align (ncclMemAlloc's allocator). It returns a CUresult.
EXPORT int fakecuda_alloc(uintptr_t *ptr, size_t bytes, size_t align) {
	REQUIRE_CONTEXT();
	if (!ptr || bytes == 0 || align == 0) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	int r = alloc_locked(ptr, bytes, align, current->device, 1);
	pthread_mutex_unlock(&mu);
	return r;
}

// fakecuda_free frees memory of fakecuda_alloc. It returns a CUresult.
EXPORT int fakecuda_free(uintptr_t ptr) {
	REQUIRE_INIT();
	pthread_mutex_lock(&mu);
	int r = free_locked(ptr, 1);
	pthread_mutex_unlock(&mu);
	return r;
}

// ---------------------------------------------------------------------------
// CUDA graphs: stream capture, instantiate, launch. Work in the fake runs
// when it is enqueued, so capture records nothing: a captured operation has
// already run once when the capture ends, and cuGraphLaunch checks its
// arguments and counts the launch but does no work. The capture state of
// each stream is kept apart from struct stream (a list of its own), so the
// functions above are unchanged.

enum {
	CUDA_ERROR_ILLEGAL_STATE_ = 401,
	CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED_ = 900,
	CUDA_ERROR_STREAM_CAPTURE_INVALIDATED_ = 901,
	CUDA_ERROR_CAPTURED_EVENT_ = 907,
	CAPTURE_MODE_GLOBAL_ = 0,
	CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD_ = 908,
	CAPTURE_MODE_RELAXED_ = 2,
};

struct capture {
	void *stream;
	int active;
	int invalidated; // a forbidden call broke it: EndCapture returns 901
	int mode;
	unsigned long long id;
	pthread_t thread;
	struct capture *next;
};

struct fake_graph {
	int alive;
	int exec; // 1: a CUgraphExec, 0: a CUgraph
	int device;
	struct fake_graph *next;
};

static struct capture *captures;
static struct fake_graph *graphs;
static unsigned long long capture_ids;
static long graph_launches;

static struct capture *lookup_capture_locked(void *stream) {
	for (struct capture *c = captures; c; c = c->next) {
		if (c->stream == stream) {
			return c;
		}
	}
	return NULL;
}

static struct fake_graph *lookup_graph_locked(void *h, int exec) {
	for (struct fake_graph *g = graphs; g; g = g->next) {
		if ((void *)g == h) {
			return (g->alive && g->exec == exec) ? g : NULL;
		}
	}
	return NULL;
}

static struct fake_graph *new_graph_locked(int exec, int device) {
	struct fake_graph *g = calloc(1, sizeof *g);
	if (!g) {
		return NULL;
	}
	g->alive = 1;
	g->exec = exec;
	g->device = device;
	g->next = graphs;
	graphs = g;
	return g;
}

// The legacy default stream cannot be captured.
EXPORT int cuStreamBeginCapture_v2(void *stream, int mode) {
	REQUIRE_INIT();
	if (mode < 0 || mode > CAPTURE_MODE_RELAXED_) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!stream) {
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED_;
	}
	int r = check_stream(stream);
	if (r) {
		return r;
	}
	pthread_mutex_lock(&mu);
	struct capture *c = lookup_capture_locked(stream);
	if (c && c->active) {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_ILLEGAL_STATE_;
	}
	if (!c) {
		c = calloc(1, sizeof *c);
		if (!c) {
			pthread_mutex_unlock(&mu);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		c->stream = stream;
		c->next = captures;
		captures = c;
	}
	c->active = 1;
	c->invalidated = 0;
	c->mode = mode;
	c->id = ++capture_ids;
	c->thread = pthread_self();
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

// cuStreamEndCapture: from the thread that began, unless the mode was relaxed.
EXPORT int cuStreamEndCapture(void *stream, void **graph) {
	REQUIRE_INIT();
	if (!graph) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	int r = check_stream(stream);
	if (r) {
		return r;
	}
	pthread_mutex_lock(&mu);
	struct capture *c = stream ? lookup_capture_locked(stream) : NULL;
	if (!c || !c->active) {
		r = CUDA_ERROR_ILLEGAL_STATE_;
	} else if (c->mode != CAPTURE_MODE_RELAXED_ && !pthread_equal(c->thread, pthread_self())) {
		r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD_;
	} else if (c->invalidated) {
		c->active = 0; // the capture ends, with no graph
		r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED_;
	} else {
		struct stream *s = lookup_stream_locked(stream);
		struct fake_graph *g = new_graph_locked(0, s ? s->device : 0);
		if (!g) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			c->active = 0;
			*graph = g;
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuStreamIsCapturing(void *stream, int *status) {
	REQUIRE_INIT();
	if (!status) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!stream && !current) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	int r = check_stream(stream);
	if (r) {
		return r;
	}
	pthread_mutex_lock(&mu);
	struct capture *c = stream ? lookup_capture_locked(stream) : NULL;
	// CU_STREAM_CAPTURE_STATUS_INVALIDATED, _ACTIVE, _NONE
	*status = (c && c->active) ? (c->invalidated ? 2 : 1) : 0;
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

static int capture_info(void *stream, int *status, unsigned long long *id) {
	if (!status) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	int r = cuStreamIsCapturing(stream, status);
	if (r == CUDA_SUCCESS && id && *status) {
		pthread_mutex_lock(&mu);
		*id = lookup_capture_locked(stream)->id;
		pthread_mutex_unlock(&mu);
	}
	return r;
}

EXPORT int cuStreamGetCaptureInfo_v2(void *stream, int *status, unsigned long long *id, void **graph,
				     const void **deps, size_t *ndeps) {
	(void)graph, (void)deps, (void)ndeps;
	return capture_info(stream, status, id);
}

EXPORT int cuStreamGetCaptureInfo_v3(void *stream, int *status, unsigned long long *id, void **graph,
				     const void **deps, const void **edges, size_t *ndeps) {
	(void)graph, (void)deps, (void)edges, (void)ndeps;
	return capture_info(stream, status, id);
}

// capturing_locked is the id of the capture under way on stream (the legacy
// default stream is never captured), or 0.
static unsigned long long capturing_locked(void *stream) {
	struct capture *c = stream ? lookup_capture_locked(stream) : NULL;
	return (c && c->active) ? c->id : 0;
}

// capture_forbids_locked applies FAKE_CUDA_CAPTURE_RULES to a query or wait
// of the calling thread on an event last recorded in capture captured (0:
// none) or on a stream capturing in it: it returns 0 when allowed, else the
// error, invalidating the captures concerned.
static int capture_forbids_locked(unsigned long long captured) {
	if (!capture_rules) {
		return CUDA_SUCCESS;
	}
	int r = CUDA_SUCCESS;
	for (struct capture *c = captures; c; c = c->next) {
		if (!c->active) {
			continue;
		}
		if (captured && c->id == captured) {
			c->invalidated = 1;
			return CUDA_ERROR_CAPTURED_EVENT_;
		}
		int own = pthread_equal(c->thread, pthread_self());
		int forbidden = capture_mode != CAPTURE_MODE_RELAXED_ &&
				((own && c->mode != CAPTURE_MODE_RELAXED_) ||
				 (!own && c->mode == CAPTURE_MODE_GLOBAL_ && capture_mode == CAPTURE_MODE_GLOBAL_));
		if (forbidden) {
			c->invalidated = 1;
			r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED_;
		}
	}
	if (captured && r == CUDA_SUCCESS) {
		r = CUDA_ERROR_CAPTURED_EVENT_; // its capture has ended: the record is the graph's
	}
	return r;
}

// cuThreadExchangeStreamCaptureMode swaps the calling thread's capture
// interaction mode.
EXPORT int cuThreadExchangeStreamCaptureMode(int *mode) {
	REQUIRE_INIT();
	if (!mode || *mode < 0 || *mode > CAPTURE_MODE_RELAXED_) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	int old = capture_mode;
	capture_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

EXPORT int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
	REQUIRE_CONTEXT();
	if (!exec || flags > 0xf) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	struct fake_graph *g = lookup_graph_locked(graph, 0);
	int r = CUDA_ERROR_INVALID_VALUE;
	if (g) {
		struct fake_graph *e = new_graph_locked(1, g->device);
		r = e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
		if (e) {
			*exec = e;
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuGraphLaunch(void *exec, void *stream) {
	REQUIRE_INIT();
	if (!stream && !current) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	int r = check_stream(stream);
	if (r) {
		return r;
	}
	pthread_mutex_lock(&mu);
	struct fake_graph *e = lookup_graph_locked(exec, 1);
	if (e) {
		graph_launches++;
	}
	pthread_mutex_unlock(&mu);
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int destroy_graph(void *h, int exec) {
	REQUIRE_INIT();
	pthread_mutex_lock(&mu);
	struct fake_graph *g = lookup_graph_locked(h, exec);
	if (g) {
		g->alive = 0;
	}
	pthread_mutex_unlock(&mu);
	return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuGraphExecDestroy(void *exec) { return destroy_graph(exec, 1); }

EXPORT int cuGraphDestroy(void *graph) { return destroy_graph(graph, 0); }

// fakecuda_graph_launches counts the successful cuGraphLaunch calls.
EXPORT long fakecuda_graph_launches(void) {
	pthread_mutex_lock(&mu);
	long n = graph_launches;
	pthread_mutex_unlock(&mu);
	return n;
}

// ---------------------------------------------------------------------------
// FAKE_CUDA_EVENT_HANG: events recorded after the n-th cuEventRecord never
// complete. The hung events are kept in a growing array (mu held).

static struct {
	int read;       // the knob was read
	long after;     // records before the hang; < 0: the knob is unset
	long records;   // cuEventRecord calls that recorded
	struct event **hung;
	size_t n, cap;
} event_hang = {.after = -1};

static void event_hang_note_locked(struct event *e) {
	if (!event_hang.read) {
		const char *s = getenv("FAKE_CUDA_EVENT_HANG");
		event_hang.after = (s && *s) ? atol(s) : -1;
		event_hang.read = 1;
	}
	if (event_hang.after < 0 || ++event_hang.records <= event_hang.after) {
		return;
	}
	event_hang_add_locked(e);
}

// event_hang_add_locked makes e a hung event, once.
static void event_hang_add_locked(struct event *e) {
	if (event_hung_locked(e)) {
		return;
	}
	if (event_hang.n == event_hang.cap) {
		size_t cap = event_hang.cap ? 2 * event_hang.cap : 16;
		struct event **p = realloc(event_hang.hung, cap * sizeof *p);
		if (!p) {
			return;
		}
		event_hang.hung = p;
		event_hang.cap = cap;
	}
	event_hang.hung[event_hang.n++] = e;
}

static int event_hung_locked(struct event *e) {
	for (size_t i = 0; i < event_hang.n; i++) {
		if (event_hang.hung[i] == e) {
			return 1;
		}
	}
	return 0;
}

// ---------------------------------------------------------------------------
// FAKE_CUDA_WORK_HANG: the work after the n-th hangs its stream; events
// recorded on a hung stream join the hung events (mu held).

static struct {
	int read;
	long after; // < 0: the knob is unset
	long work;
	struct {
		void *stream; // NULL: the legacy default stream (of any device)
		int device;
	} hung[64];
	int n;
} work_hang = {.after = -1};

static void work_note_locked(void *stream, int device) {
	if (stream_busy < 0) {
		const char *b = getenv("FAKE_CUDA_STREAM_BUSY");
		stream_busy = (b && *b) ? atol(b) : 0;
	}
	if (stream_busy > 0 && !capturing_locked(stream)) {
		long *c = busy_count_locked(stream);
		if (c) {
			*c = stream_busy;
		}
	}
	if (!work_hang.read) {
		const char *s = getenv("FAKE_CUDA_WORK_HANG");
		work_hang.after = (s && *s) ? atol(s) : -1;
		work_hang.read = 1;
	}
	if (work_hang.after < 0 || capturing_locked(stream) || ++work_hang.work <= work_hang.after) {
		return;
	}
	for (int i = 0; i < work_hang.n; i++) {
		if (work_hang.hung[i].stream == stream) {
			return;
		}
	}
	if (work_hang.n < 64) {
		work_hang.hung[work_hang.n].stream = stream;
		work_hang.hung[work_hang.n].device = device;
		work_hang.n++;
	}
}

static void event_on_stream_locked(struct event *e, void *stream, int device) {
	for (int i = 0; i < work_hang.n; i++) {
		if (work_hang.hung[i].stream == stream) {
			event_hang_add_locked(e);
			return;
		}
	}
}

// ---------------------------------------------------------------------------
// Modules, functions and launches (helper kern: cuda/module.go, launch.go).
//
// A fake module is text: a first line holding "FAKECUBIN" or "FAKEPTX"
// (what the fake NVRTC writes; "// FAKEPTX" in real PTX, which then loads on
// both), then lines
//   kernel NAME [SIZES [BEHAVIOUR]]   (or "// kernel ...")
// where SIZES lists the parameters' sizes in bytes ("4,8,8,4"; "-" for
// none) and BEHAVIOUR is what a launch does on the host:
//   saxpy  (float a, const float *x, float *y, int n): y[i] = a*x[i] + y[i]
//          for i < min(n, threads)
//   echo   (void *out, ...): writes every parameter's bytes, at the offsets
//          cuFuncGetParamInfo reports, to out (so tests see the marshalling)
//   count  (int *counter, ...): adds 1 to *counter
// A kernel without SIZES has no parameter information (cuFuncGetParamInfo
// returns CUDA_ERROR_NOT_SUPPORTED) and a launch of it does nothing.
// Anything else fails to load with CUDA_ERROR_INVALID_IMAGE and a JIT log.
// As on a GPU, a launch on a stream being captured does not run: it is
// recorded (here: counted), and a graph launch does not replay it.
// Launch checks: a live function of a live module of the current context's
// device, grid and block dimensions >= 1, at most 1024 threads a block,
// dynamic shared memory within the function's maximum (48 KiB unless
// raised with cuFuncSetAttribute, at most 227 KiB), a cooperative grid that
// fits on the device at once, cluster dimensions only on compute
// capability 9.0 and newer and dividing the grid.

enum {
	CUDA_ERROR_INVALID_IMAGE_ = 200,
	CUDA_ERROR_ILLEGAL_ADDRESS_ = 700,
	CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES_ = 701,
	CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE_ = 720,
	CUDA_ERROR_NOT_SUPPORTED_ = 801,
	FAKE_MAX_PARAMS = 64,
	FAKE_DEFAULT_DYN_SMEM = 48 * 1024,
	FAKE_MAX_DYN_SMEM = 227 * 1024,
};

struct fake_function {
	struct fake_module *mod;
	char name[128];
	int nparams; // -1: no parameter information
	size_t sizes[FAKE_MAX_PARAMS];
	size_t offsets[FAKE_MAX_PARAMS];
	char behaviour[16];
	int max_dyn_smem;
	struct fake_function *next;
};

struct fake_module {
	int alive;
	int device;
	struct fake_function *funcs;
	struct fake_module *next;
};

static struct fake_module *modules;
static long captured_launches;

static struct fake_function *lookup_function_locked(void *h) {
	for (struct fake_module *m = modules; m; m = m->next) {
		for (struct fake_function *f = m->funcs; f; f = f->next) {
			if ((void *)f == h) {
				return m->alive ? f : NULL;
			}
		}
	}
	return NULL;
}

static void jit_log(unsigned n, int *opts, void **vals, const char *msg) {
	char *buf = NULL;
	size_t len = 0;
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == 5) {
			buf = vals[i];
		} else if (opts[i] == 6) {
			len = (size_t)(uintptr_t)vals[i];
		}
	}
	if (buf && len) {
		snprintf(buf, len, "%s", msg);
	}
}

static int parse_kernel_line(struct fake_module *m, const char *line) {
	struct fake_function *f = calloc(1, sizeof *f);
	if (!f) {
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	char sizes[512] = "";
	if (sscanf(line, "kernel %127s %511s %15s", f->name, sizes, f->behaviour) < 1) {
		free(f);
		return CUDA_ERROR_INVALID_IMAGE_;
	}
	f->nparams = -1;
	if (sizes[0] == '-') {
		f->nparams = 0;
	} else if (sizes[0]) {
		f->nparams = 0;
		size_t off = 0;
		for (char *p = sizes; *p && f->nparams < FAKE_MAX_PARAMS;) {
			size_t s = strtoul(p, &p, 10);
			// The alignment a C type of that size has at most: its
			// lowest set bit, up to 8 (a struct of three ints: 4).
			size_t align = s & (~s + 1);
			if (align > 8 || align == 0) {
				align = 8;
			}
			off = (off + align - 1) / align * align;
			f->sizes[f->nparams] = s;
			f->offsets[f->nparams] = off;
			f->nparams++;
			off += s;
			if (*p == ',') {
				p++;
			}
		}
	}
	f->max_dyn_smem = FAKE_DEFAULT_DYN_SMEM;
	f->mod = m;
	f->next = m->funcs;
	m->funcs = f;
	return CUDA_SUCCESS;
}

EXPORT int cuModuleLoadDataEx(void **module, const void *image, unsigned int n, int *opts, void **vals) {
	REQUIRE_CONTEXT();
	if (!module || !image || (n && (!opts || !vals))) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	const char *text = image;
	size_t first = strcspn(text, "\n");
	char head[256];
	snprintf(head, sizeof head, "%.*s", (int)(first < 255 ? first : 255), text);
	if (!strstr(head, "FAKECUBIN") && !strstr(head, "FAKEPTX")) {
		jit_log(n, opts, vals, "fakecuda: not a fake module (FAKECUBIN or FAKEPTX)");
		return CUDA_ERROR_INVALID_IMAGE_;
	}
	struct fake_module *m = calloc(1, sizeof *m);
	if (!m) {
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->alive = 1;
	m->device = current->device;
	for (const char *p = strchr(text, '\n'); p && *p; p = strchr(p, '\n')) {
		p++;
		if (strncmp(p, "// kernel ", 10) == 0) {
			p += 3; // a kernel line inside a PTX comment
		}
		if (strncmp(p, "kernel ", 7) == 0) {
			char line[1024];
			size_t len = strcspn(p, "\n");
			if (len >= sizeof line) {
				len = sizeof line - 1;
			}
			memcpy(line, p, len);
			line[len] = 0;
			int r = parse_kernel_line(m, line);
			if (r) {
				jit_log(n, opts, vals, "fakecuda: bad kernel line");
				return r;
			}
		}
	}
	pthread_mutex_lock(&mu);
	m->next = modules;
	modules = m;
	pthread_mutex_unlock(&mu);
	*module = m;
	return CUDA_SUCCESS;
}

EXPORT int cuModuleUnload(void *module) {
	REQUIRE_CONTEXT();
	pthread_mutex_lock(&mu);
	int r = CUDA_ERROR_INVALID_HANDLE;
	for (struct fake_module *m = modules; m; m = m->next) {
		if ((void *)m == module && m->alive) {
			m->alive = 0;
			r = CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuModuleGetFunction(void **fn, void *module, const char *name) {
	REQUIRE_CONTEXT();
	if (!fn || !name) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	int r = CUDA_ERROR_INVALID_HANDLE;
	for (struct fake_module *m = modules; m; m = m->next) {
		if ((void *)m == module && m->alive) {
			r = CUDA_ERROR_NOT_FOUND;
			for (struct fake_function *f = m->funcs; f; f = f->next) {
				if (strcmp(f->name, name) == 0) {
					*fn = f;
					r = CUDA_SUCCESS;
					break;
				}
			}
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuFuncGetAttribute(int *value, int attr, void *fn) {
	REQUIRE_CONTEXT();
	if (!value) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	struct fake_function *f = lookup_function_locked(fn);
	int r = f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	if (f) {
		switch (attr) {
		case 0: // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
			*value = 1024;
			break;
		case 4: // NUM_REGS
			*value = 32;
			break;
		case 8: // MAX_DYNAMIC_SHARED_SIZE_BYTES
			*value = f->max_dyn_smem;
			break;
		case 1: // SHARED_SIZE_BYTES
		case 2: // CONST_SIZE_BYTES
		case 3: // LOCAL_SIZE_BYTES
			*value = 0;
			break;
		case 5: // PTX_VERSION
		case 6: // BINARY_VERSION
			*value = cc;
			break;
		default:
			r = CUDA_ERROR_INVALID_VALUE;
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuFuncSetAttribute(void *fn, int attr, int value) {
	REQUIRE_CONTEXT();
	pthread_mutex_lock(&mu);
	struct fake_function *f = lookup_function_locked(fn);
	int r = f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	if (f) {
		if (attr != 8 || value < 0 || value > FAKE_MAX_DYN_SMEM) {
			r = CUDA_ERROR_INVALID_VALUE;
		} else {
			f->max_dyn_smem = value;
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

EXPORT int cuFuncGetParamInfo(void *fn, size_t index, size_t *offset, size_t *size) {
	REQUIRE_CONTEXT();
	pthread_mutex_lock(&mu);
	struct fake_function *f = lookup_function_locked(fn);
	int r = CUDA_ERROR_INVALID_HANDLE;
	if (f) {
		if (f->nparams < 0) {
			r = CUDA_ERROR_NOT_SUPPORTED_;
		} else if (index >= (size_t)f->nparams) {
			r = CUDA_ERROR_INVALID_VALUE;
		} else {
			if (offset) {
				*offset = f->offsets[index];
			}
			if (size) {
				*size = f->sizes[index];
			}
			r = CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return r;
}

static int fake_blocks_per_sm(int block, size_t smem) {
	if (block <= 0 || block > 1024) {
		return 0;
	}
	int by_threads = 2048 / block;
	int by_smem = smem ? (int)(228 * 1024 / smem) : 32;
	int n = by_threads < by_smem ? by_threads : by_smem;
	return n < 32 ? n : 32;
}

EXPORT int cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *fn, int blockSize, size_t smem) {
	REQUIRE_CONTEXT();
	if (!blocks || blockSize <= 0) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_lock(&mu);
	struct fake_function *f = lookup_function_locked(fn);
	pthread_mutex_unlock(&mu);
	if (!f) {
		return CUDA_ERROR_INVALID_HANDLE;
	}
	*blocks = (smem > (size_t)f->max_dyn_smem) ? 0 : fake_blocks_per_sm(blockSize, smem);
	return CUDA_SUCCESS;
}

static int fake_run(struct fake_function *f, unsigned long long threads, void **params) {
	if (f->nparams <= 0 || !params) {
		return f->nparams > 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	}
	if (strcmp(f->behaviour, "saxpy") == 0 && f->nparams == 4) {
		float a = *(float *)params[0];
		float *x = *(float **)params[1], *y = *(float **)params[2];
		int n = *(int *)params[3];
		unsigned long long m = (unsigned long long)(n < 0 ? 0 : n);
		if (m > threads) {
			m = threads;
		}
		if (!check_range((uintptr_t)x, m * 4) || !check_range((uintptr_t)y, m * 4)) {
			return CUDA_ERROR_ILLEGAL_ADDRESS_;
		}
		for (unsigned long long i = 0; i < m; i++) {
			y[i] = a * x[i] + y[i];
		}
	} else if (strcmp(f->behaviour, "echo") == 0) {
		unsigned char *out = *(unsigned char **)params[0];
		int last = f->nparams - 1;
		size_t total = f->offsets[last] + f->sizes[last];
		if (!check_range((uintptr_t)out, total)) {
			return CUDA_ERROR_ILLEGAL_ADDRESS_;
		}
		for (int i = 0; i < f->nparams; i++) {
			memcpy(out + f->offsets[i], params[i], f->sizes[i]);
		}
	} else if (strcmp(f->behaviour, "count") == 0) {
		int *counter = *(int **)params[0];
		if (!check_range((uintptr_t)counter, 4)) {
			return CUDA_ERROR_ILLEGAL_ADDRESS_;
		}
		__atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
	}
	return CUDA_SUCCESS;
}

static int fake_launch(void *fn, const unsigned grid[3], const unsigned block[3], unsigned smem, void *stream,
		       void **params, int cooperative, const unsigned cluster[3]) {
	// Measured on an H200 (driver 580, CUDA 13.0): with no context
	// current on the thread, the driver launches a CUfunction in its
	// module's context (BenchmarkLaunch's probe: CUresult 0). A current
	// context of another device is refused here (not measured).
	REQUIRE_INIT();
	for (int i = 0; i < 3; i++) {
		if (grid[i] == 0 || block[i] == 0) {
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	unsigned long long threads_per_block = (unsigned long long)block[0] * block[1] * block[2];
	if (threads_per_block > 1024 || block[2] > 64) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	int r = check_stream(stream);
	if (r) {
		return r;
	}
	pthread_mutex_lock(&mu);
	struct fake_function *f = lookup_function_locked(fn);
	struct stream *s = stream ? lookup_stream_locked(stream) : NULL;
	struct capture *c = stream ? lookup_capture_locked(stream) : NULL;
	int capturing = c && c->active;
	pthread_mutex_unlock(&mu);
	if (!f) {
		return CUDA_ERROR_INVALID_HANDLE;
	}
	int dev = current ? current->device : f->mod->device;
	if (f->mod->device != dev || (s && s->device != dev)) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (smem > (unsigned)f->max_dyn_smem) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	unsigned long long blocks = (unsigned long long)grid[0] * grid[1] * grid[2];
	if (cooperative && blocks > (unsigned long long)fake_blocks_per_sm((int)threads_per_block, smem) * 132) {
		return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE_;
	}
	if (cluster && cluster[0]) {
		if (cc < 90) {
			return CUDA_ERROR_NOT_SUPPORTED_;
		}
		for (int i = 0; i < 3; i++) {
			if (cluster[i] == 0 || grid[i] % cluster[i]) {
				return CUDA_ERROR_INVALID_VALUE;
			}
		}
		if ((unsigned long long)cluster[0] * cluster[1] * cluster[2] > 8) {
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	if (capturing) {
		pthread_mutex_lock(&mu);
		captured_launches++;
		pthread_mutex_unlock(&mu);
		return CUDA_SUCCESS;
	}
	return fake_run(f, blocks * threads_per_block, params);
}

EXPORT int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			  unsigned smem, void *stream, void **params, void **extra) {
	if (extra) {
		return CUDA_ERROR_INVALID_VALUE; // the binding never passes extra
	}
	unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
	return fake_launch(fn, grid, block, smem, stream, params, 0, NULL);
}

EXPORT int cuLaunchCooperativeKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
				     unsigned bz, unsigned smem, void *stream, void **params) {
	unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
	return fake_launch(fn, grid, block, smem, stream, params, 1, NULL);
}

// CUlaunchConfig and CUlaunchAttribute (CUDA 12.0 - 13.0).
struct fake_launch_attr {
	int id;
	char pad[4];
	union {
		char raw[64];
		unsigned dims[3];
		int value;
	} v;
};

struct fake_launch_config {
	unsigned gx, gy, gz, bx, by, bz, smem;
	void *stream;
	struct fake_launch_attr *attrs;
	unsigned nattrs;
};

EXPORT int cuLaunchKernelEx(const struct fake_launch_config *c, void *fn, void **params, void **extra) {
	if (!c || extra || (c->nattrs && !c->attrs)) {
		return CUDA_ERROR_INVALID_VALUE;
	}
	int cooperative = 0;
	unsigned cluster[3] = {0, 0, 0};
	for (unsigned i = 0; i < c->nattrs; i++) {
		switch (c->attrs[i].id) {
		case 2: // CU_LAUNCH_ATTRIBUTE_COOPERATIVE
			cooperative = c->attrs[i].v.value != 0;
			break;
		case 4: // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
			memcpy(cluster, c->attrs[i].v.dims, sizeof cluster);
			if (!cluster[0]) {
				return CUDA_ERROR_INVALID_VALUE;
			}
			break;
		default:
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	unsigned grid[3] = {c->gx, c->gy, c->gz}, block[3] = {c->bx, c->by, c->bz};
	return fake_launch(fn, grid, block, c->smem, c->stream, params, cooperative, cluster);
}

EXPORT long fakecuda_captured_launches(void) {
	pthread_mutex_lock(&mu);
	long n = captured_launches;
	pthread_mutex_unlock(&mu);
	return n;
}
