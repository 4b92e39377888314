// nccl4go C shim: the per-collective config (ncclCollConfig_t and the eight
// nccl*Config functions; NCCL 2.31.0, as STyGIANet/nccl 2.31.0a16 reports
// it, and 2.31.2). The facts are in internal/versions/ABI-2.31-2.32.md §3.
//
// NCCL reads the config, its algSelection string and its ext list only
// during the call (NVIDIA's documentation: "must keep them valid for the
// duration of each call"). The Go side passes flat values and one block of
// string bytes (no pointers inside Go memory); capi_coll_config lays the
// config, NUL-terminated copies of the strings and the ext list out on its
// own stack, calls NCCL and returns: nothing of Go's is kept.
#ifndef NCCL4GO_COLLCONFIG_H
#define NCCL4GO_COLLCONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "shim.h"

// ncclConfigExt_t: 24 bytes, alignment 8. val is a union of int,
// const char* and void*.
typedef struct capi_config_ext {
	struct capi_config_ext *next;
	int vendorId;
	int optionId;
	union {
		int intVal;
		const char *strVal;
		void *ptrVal;
	} val;
} capi_config_ext;

// ncclCollConfig_t as of NCCL 2.32.3: 72 bytes. 2.31.0a16 has the first 40,
// 2.31.2 the first 64; the binding sends exactly the loaded release's
// layout (internal/versions CollConfigLayouts).
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	capi_config_ext *ext;
	int minCTAs;
	int maxCTAs;
	int nvlsCTAs;
	int cgaClusterSize;
	const char *algSelection;          // 2.31.2
	int forceAlgSelection;             // 2.31.2
	int CTAPolicy;                     // 2.31.2
	uint64_t userProfilerTag;          // 2.31.2
	uintptr_t launchCompletionEvent;   // 2.32.3 (a cudaEvent_t)
} capi_coll_config_v23203;

// What the Go side passes: the config's values, flat. A string is an
// offset and a length in the call's string block; alg_len -1 is NULL.
typedef struct {
	unsigned int size;    // bytes of ncclCollConfig_t to send (40, 64 or 72)
	unsigned int version; // the version to declare
	int minCTAs, maxCTAs, nvlsCTAs, cgaClusterSize;
	int alg_off, alg_len;
	int forceAlgSelection;
	int CTAPolicy;
	uint64_t userProfilerTag;
	uintptr_t launchCompletionEvent;
	int next; // entries of the ext list
} capi_coll_in;

// One entry of the ext list. kind says which member of the union is set:
// CAPI_EXT_INT (int_val), CAPI_EXT_STR (str_off, str_len in the string
// block) or CAPI_EXT_PTR (ptr_val).
typedef struct {
	int vendorId, optionId, kind, int_val;
	uintptr_t ptr_val;
	int str_off, str_len;
} capi_ext_in;

enum { CAPI_EXT_INT, CAPI_EXT_STR, CAPI_EXT_PTR };

// The collectives of capi_coll_config (which), in the order of the Go
// side's kinds.
enum {
	CAPI_COLL_ALLREDUCE,
	CAPI_COLL_BROADCAST,
	CAPI_COLL_REDUCE,
	CAPI_COLL_ALLGATHER,
	CAPI_COLL_REDUCESCATTER,
	CAPI_COLL_ALLTOALL,
	CAPI_COLL_GATHER,
	CAPI_COLL_SCATTER,
	CAPI_COLL_COUNT,
};

// The most ext entries and string bytes one call may pass (they live on
// the trampoline's stack).
enum { CAPI_EXT_MAX = 64, CAPI_COLL_STR_MAX = 16384 };

// capi_coll_config calls nccl<which>Config with the collective's arguments
// (count is sendcount or recvcount as NCCL names it; op and root are
// ignored where the collective has none) and the config in: the gate of a
// call that queues work first (CAPI_PENDING, CAPI_HELD, CAPI_ORPHANED
// without calling), CAPI_MISSING / CAPI_NOT_LOADED for a missing function,
// 4 (ncclInvalidArgument) for input the Go side should have refused.
capi_status capi_coll_config(int which, uintptr_t send, uintptr_t recv, size_t count, int datatype, int op, int root,
			     uintptr_t comm, uintptr_t stream, const capi_coll_in *in, const capi_ext_in *ext,
			     const char *strs, size_t nstrs);

#endif
