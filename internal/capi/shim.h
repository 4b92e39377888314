// nccl4go C shim: the only C of the binding.
//
// It opens libnccl.so.2 and libcuda.so.1 at run time (dlopen), resolves every
// symbol once, and exposes one C function per library call. It declares the
// parts of NCCL's and CUDA's ABI it needs in its own words: no NCCL or CUDA
// header is needed to build it. The facts come from NCCL's nccl.h of each
// release (listed in the project's reference notes); every versioned struct
// names the NCCL release whose layout it matches, and layout_test.go pins
// every offset and size.
#ifndef NCCL4GO_SHIM_H
#define NCCL4GO_SHIM_H

#include <stddef.h>
#include <stdint.h>

// ---------------------------------------------------------------------------
// Status of a shim call. code is the library's result (ncclResult_t or
// CUresult), or one of the negative shim codes below. detail is NULL on
// success; on an NCCL failure it is a malloc'd copy of ncclGetLastError taken
// inside the same C call (the caller frees it).
typedef struct {
	int code;
	char *detail;
} capi_status;

enum {
	CAPI_MISSING = -1,    // the loaded library lacks the symbol
	CAPI_NOT_LOADED = -2, // no library is loaded
	CAPI_PENDING = -3,    // the communicator's previous operation is still in progress
	CAPI_HELD = -4,       // another thread's open group holds the communicator's work: not called
	CAPI_ORPHANED = -5,   // a thread ended inside a group holding the communicator's work: not called
};

// ---------------------------------------------------------------------------
// NCCL types in our own words.

// ncclUniqueId: 128 opaque bytes, passed by value to the InitRank family.
typedef struct {
	char internal[128];
} capi_unique_id;

// ncclConfig_t as of NCCL 2.32.3: 120 bytes (96 up to 2.30.7, 112 in 2.31;
// internal/versions/ABI-2.31-2.32.md §4). Older libraries read a prefix
// (they clamp size to their own sizeof) and reset fields newer than version.
// The binding sends size 120 only to a 2.32.3 or later library and
// CAPI_CONFIG_SIZE_V23102 (112, the struct up to hostCftMode) to the
// others. blocking to splitShare are in every supported release; each later
// field names its first (internal/versions has the same releases).
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
	int cgaClusterSize;
	int minCTAs;
	int maxCTAs;
	const char *netName;
	int splitShare;
	int trafficClass;          // 2.26 (honoured from config version 2.25.0)
	const char *commName;      // 2.27
	int collnetEnable;         // 2.27
	int CTAPolicy;             // 2.27
	int shrinkShare;           // 2.27
	int nvlsCTAs;              // 2.27
	int nChannelsPerNetPeer;   // 2.28
	int nvlinkCentricSched;    // 2.28
	int graphUsageMode;        // 2.29
	int numRmaCtx;             // 2.29
	int maxP2pPeers;           // 2.30.3
	int graphStreamOrdering;   // 2.30.7 (honoured from config version 2.30.5)
	int launchOrderImplicit;   // 2.31.0 (STyGIANet/nccl 2.31.0a16, reporting 23100)
	int numRmaSig;             // 2.31.0
	int rmaEagerInit;          // 2.31.0
	int hostCftMode;           // 2.31.2 (nccl4py's bindings of 2.31.2)
	int nvlsHostMode;          // 2.32.3 (NVIDIA's documentation: nccl4py's NcclNvlsHostMode)
} capi_config_v23203;

// The size of ncclConfig_t up to hostCftMode: what NCCL 2.31 declares, and
// what the binding sends to every library older than 2.32.3.
#define CAPI_CONFIG_SIZE_V23102 112

// ncclCommProperties_t as of NCCL 2.29.2 and 2.29.3: 40 bytes, a 1-byte ginType.
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int rank;
	int nRanks;
	int cudaDev;
	int nvmlDev;
	uint8_t deviceApiSupport;
	uint8_t multimemSupport;
	uint8_t ginType;
} capi_props_v22902;

// ncclCommProperties_t as of NCCL 2.31.0a16 and 2.31.2 (STyGIANet/nccl
// src/include/nccl_device/core.h; nccl4py's bindings of 2.31.2): 144 bytes,
// the fields after railedGinType filled for callers declaring 2.31.0 or
// later. 2.32.3 appends CFT fields whose layout is not established.
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int rank;
	int nRanks;
	int cudaDev;
	int nvmlDev;
	uint8_t deviceApiSupport;
	uint8_t multimemSupport;
	int ginType;
	int nLsaTeams;                    // 2.29.7
	uint8_t hostRmaSupport;           // 2.29.7
	int railedGinType;                // 2.29.7
	uint64_t commHash;                // 2.31.0
	int ginMinStride;                 // 2.31.0
	int ginConnectionType;            // 2.31.0
	uint8_t ginSupport[64];           // 2.31.0
	size_t devCommRuntimeVersionSize; // 2.31.0
} capi_props_v23100;

// ncclCommProperties_t as of NCCL 2.29.7 through 2.30.7 is the prefix of
// capi_props_v23100 up to railedGinType: 56 bytes (offsetof commHash), the
// same offsets, so the binding sends capi_props_v23100 with size 56.

// ncclSimInfo_t, 2.22.3 through 2.30.7: 24 bytes.
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	float estimatedTime;
} capi_sim_info;

// ncclWaitSignalDesc_t, 2.29.2 and later: 16 bytes.
typedef struct {
	int opCnt;
	int peer;
	int sigIdx;
	int ctx;
} capi_wait_signal_desc;

// ncclDevCommRequirements_t, one struct per layout family. The resource and
// team requirement lists are pointers the binding leaves NULL.

// NCCL 2.28.3: 24 bytes, no versioned header.
typedef struct {
	void *resourceRequirementsList;
	void *teamRequirementsList;
	uint8_t lsaMultimem;
	int lsaBarrierCount;
} capi_devcomm_reqs_v22803;

// NCCL 2.28.7 through 2.28.9: 56 bytes, no versioned header.
typedef struct {
	void *resourceRequirementsList;
	void *teamRequirementsList;
	uint8_t lsaMultimem;
	int barrierCount;
	int lsaBarrierCount;
	int railGinBarrierCount;
	int lsaLLA2ABlockCount;
	int lsaLLA2ASlotCount;
	uint8_t ginForceEnable;
	int ginContextCount;
	int ginSignalCount;
	int ginCounterCount;
} capi_devcomm_reqs_v22807;

// NCCL 2.29.2 and later: a versioned header, then the fields of each release
// appended. capi_devcomm_reqs_v23102 holds them all; a caller declaring an
// older version passes the size of that version's prefix (see devcomm.go).
// Sizes: 72 (2.29.2-2.29.3), 88 (2.29.7), 96 (2.30.3-2.30.7), 112 (2.31.0,
// as STyGIANet/nccl's 2.31.0a16 core.h has it: useRuntimeVersion then 3
// bytes of padding), 120 (2.31.2: nccl4py's bindings generated from its
// headers, and NVIDIA's 2.31.2 nccl_device/core.h). 2.32.3's layout is not
// established: the binding declares at most 2.31.2.
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	void *resourceRequirementsList;
	void *teamRequirementsList;
	uint8_t lsaMultimem;
	int barrierCount;                // 2.28.7
	int lsaBarrierCount;
	int railGinBarrierCount;         // 2.28.7
	int lsaLLA2ABlockCount;          // 2.28.7
	int lsaLLA2ASlotCount;           // 2.28.7
	uint8_t ginForceEnable;          // 2.28.7
	int ginContextCount;             // 2.28.7
	int ginSignalCount;              // 2.28.7
	int ginCounterCount;             // 2.28.7
	int ginConnectionType;           // 2.29.7
	uint8_t ginExclusiveContexts;    // 2.29.7
	int ginQueueDepth;               // 2.29.7
	int ginTrafficClass;             // 2.30.3
	int worldGinBarrierCount;        // 2.30.3
	uint8_t ginStrongSignalsRequired; // 2.30.7
	uint8_t ginVaSignalsRequired;     // 2.30.7
	int ginCustomStride;             // 2.31.0 (NCCL_GIN_CONNECTION_CUSTOM_STRIDE's stride; default 1)
	int ginType;                     // 2.31.0 (ncclGinType_t: the backend; NONE, the default, takes any)
	uint8_t useRuntimeVersion;       // 2.31.0 (write the devComm in the library's own layout)
	int cftCaps;                     // 2.31.2 (ncclCftCap_t bits; NCCL_CFT_NONE = 0, the default)
	int cftBarrierCount;             // 2.31.2
} capi_devcomm_reqs_v23102;

// ncclDevComm_t: opaque, written by NCCL. 256 bytes, 8-aligned, cover every
// release read (88 in 2.28.3 up to 240 in 2.30.x).
typedef struct {
	uint64_t words[32];
} capi_devcomm;

// ---------------------------------------------------------------------------
// The list of every NCCL function the binding calls. It drives the pointer
// table, the dlsym loop and the trampolines, so declaration and lookup
// cannot drift; zsyms.go (go generate) reads the Go side's symbol table,
// with each function's first release, from it.
//
// X(name, first release as MMmmpp, gate, flags, parameters, arguments)
// All of these return ncclResult_t. The trampoline capi_<name> has the same
// parameters (device addresses and handles as uintptr_t) and returns a
// capi_status.
//
// gate is the communicator parameter, or 0. For a gated call the trampoline
// first asks ncclCommGetAsyncError, while communicators NCCL runs
// non-blocking are alive: while an earlier operation of the communicator is
// still in progress, NCCL would reject the call, so the trampoline returns
// CAPI_PENDING without calling and the Go side waits and calls again.
//
// flags are facts about the call, compile-time constants in its trampoline:
//   CAPI_F_QUEUES       it adds work to the communicator's queue, which
//                       belongs to one thread's group at a time: inside a
//                       group it records the communicator in the thread's
//                       group, and it is refused (CAPI_HELD) while another
//                       thread's group holds the queue (group.c)
//   CAPI_F_LEAKS_DEPTH  NCCL may return early from it without closing the
//                       group it opened inside (see repair_group_depth)
//   CAPI_F_GROUP_START, CAPI_F_GROUP_END: ncclGroupStart, and the calls that
//                       end a group level
enum {
	CAPI_F_QUEUES = 1,
	CAPI_F_LEAKS_DEPTH = 2,
	CAPI_F_GROUP_START = 4,
	CAPI_F_GROUP_END = 8,
};

#define CAPI_NCCL_FUNCS(X)                                                                        \
	X(ncclGetVersion, 20305, 0, 0, (int *version), (version)) \
	X(ncclGetUniqueId, 20305, 0, 0, (capi_unique_id * id), (id)) \
	X(ncclCommFinalize, 21403, comm, CAPI_F_QUEUES, (uintptr_t comm), ((void *)comm)) \
	X(ncclCommDestroy, 20305, comm, CAPI_F_QUEUES | CAPI_F_LEAKS_DEPTH, (uintptr_t comm), ((void *)comm)) \
	X(ncclCommAbort, 20402, 0, CAPI_F_LEAKS_DEPTH, (uintptr_t comm), ((void *)comm)) \
	X(ncclCommRevoke, 22807, 0, 0, (uintptr_t comm, int flags), ((void *)comm, flags)) \
	X(ncclCommSuspend, 22907, comm, 0, (uintptr_t comm, int flags), ((void *)comm, flags)) \
	X(ncclCommResume, 22907, comm, 0, (uintptr_t comm), ((void *)comm)) \
	X(ncclCommGetAsyncError, 20402, 0, 0, (uintptr_t comm, int *state), ((void *)comm, state)) \
	X(ncclCommCount, 20305, comm, 0, (uintptr_t comm, int *count), ((void *)comm, count)) \
	X(ncclCommCuDevice, 20305, comm, 0, (uintptr_t comm, int *device), ((void *)comm, device)) \
	X(ncclCommUserRank, 20305, comm, 0, (uintptr_t comm, int *rank), ((void *)comm, rank)) \
	X(ncclCommMemStats, 22907, comm, 0, (uintptr_t comm, int stat, uint64_t *value), ((void *)comm, stat, value)) \
	X(ncclCommQueryProperties, 22902, comm, 0, (uintptr_t comm, void *props), ((void *)comm, props)) \
	X(ncclCommSplit, 21801, comm, CAPI_F_QUEUES, (uintptr_t comm, int color, int key, uintptr_t *newcomm, capi_config_v23203 *config), ((void *)comm, color, key, (void **)newcomm, config)) \
	X(ncclCommShrink, 22703, comm, CAPI_F_QUEUES, (uintptr_t comm, int *exclude, int nexclude, uintptr_t *newcomm, capi_config_v23203 *config, int flags), ((void *)comm, exclude, nexclude, (void **)newcomm, config, flags)) \
	X(ncclCommGetUniqueId, 22902, comm, 0, (uintptr_t comm, capi_unique_id *id), ((void *)comm, id)) \
	X(ncclMemFree, 21901, 0, 0, (uintptr_t ptr), ((void *)ptr)) \
	X(ncclCommRegister, 21901, comm, 0, (uintptr_t comm, uintptr_t buff, size_t size, uintptr_t *handle), ((void *)comm, (void *)buff, size, (void **)handle)) \
	X(ncclCommDeregister, 21901, comm, 0, (uintptr_t comm, uintptr_t handle), ((void *)comm, (void *)handle)) \
	X(ncclCommWindowRegister, 22703, comm, CAPI_F_QUEUES, (uintptr_t comm, uintptr_t buff, size_t size, uintptr_t *win, int flags), ((void *)comm, (void *)buff, size, (void **)win, flags)) \
	X(ncclCommWindowDeregister, 22703, comm, 0, (uintptr_t comm, uintptr_t win), ((void *)comm, (void *)win)) \
	X(ncclWinGetUserPtr, 22902, comm, 0, (uintptr_t comm, uintptr_t win, uintptr_t *ptr), ((void *)comm, (void *)win, (void **)ptr)) \
	X(ncclRedOpCreatePreMulSum, 21104, comm, 0, (int *op, uintptr_t scalar, int datatype, int residence, uintptr_t comm), (op, (void *)scalar, datatype, residence, (void *)comm)) \
	X(ncclRedOpDestroy, 21104, comm, 0, (int op, uintptr_t comm), (op, (void *)comm)) \
	X(ncclAllReduce, 20305, comm, CAPI_F_QUEUES, (uintptr_t send, uintptr_t recv, size_t count, int datatype, int op, uintptr_t comm, uintptr_t stream), ((const void *)send, (void *)recv, count, datatype, op, (void *)comm, (void *)stream)) \
	X(ncclBroadcast, 20305, comm, CAPI_F_QUEUES, (uintptr_t send, uintptr_t recv, size_t count, int datatype, int root, uintptr_t comm, uintptr_t stream), ((const void *)send, (void *)recv, count, datatype, root, (void *)comm, (void *)stream)) \
	X(ncclReduce, 20305, comm, CAPI_F_QUEUES, (uintptr_t send, uintptr_t recv, size_t count, int datatype, int op, int root, uintptr_t comm, uintptr_t stream), ((const void *)send, (void *)recv, count, datatype, op, root, (void *)comm, (void *)stream)) \
	X(ncclAllGather, 20305, comm, CAPI_F_QUEUES, (uintptr_t send, uintptr_t recv, size_t sendcount, int datatype, uintptr_t comm, uintptr_t stream), ((const void *)send, (void *)recv, sendcount, datatype, (void *)comm, (void *)stream)) \
	X(ncclReduceScatter, 20305, comm, CAPI_F_QUEUES, (uintptr_t send, uintptr_t recv, size_t recvcount, int datatype, int op, uintptr_t comm, uintptr_t stream), ((const void *)send, (void *)recv, recvcount, datatype, op, (void *)comm, (void *)stream)) \
	X(ncclAlltoAll, 22803, comm, CAPI_F_QUEUES, (uintptr_t send, uintptr_t recv, size_t count, int datatype, uintptr_t comm, uintptr_t stream), ((const void *)send, (void *)recv, count, datatype, (void *)comm, (void *)stream)) \
	X(ncclGather, 22803, comm, CAPI_F_QUEUES, (uintptr_t send, uintptr_t recv, size_t count, int datatype, int root, uintptr_t comm, uintptr_t stream), ((const void *)send, (void *)recv, count, datatype, root, (void *)comm, (void *)stream)) \
	X(ncclScatter, 22803, comm, CAPI_F_QUEUES, (uintptr_t send, uintptr_t recv, size_t count, int datatype, int root, uintptr_t comm, uintptr_t stream), ((const void *)send, (void *)recv, count, datatype, root, (void *)comm, (void *)stream)) \
	X(ncclSend, 20703, comm, CAPI_F_QUEUES, (uintptr_t send, size_t count, int datatype, int peer, uintptr_t comm, uintptr_t stream), ((const void *)send, count, datatype, peer, (void *)comm, (void *)stream)) \
	X(ncclRecv, 20703, comm, CAPI_F_QUEUES, (uintptr_t recv, size_t count, int datatype, int peer, uintptr_t comm, uintptr_t stream), ((void *)recv, count, datatype, peer, (void *)comm, (void *)stream)) \
	X(ncclPutSignal, 22902, comm, CAPI_F_QUEUES, (uintptr_t local, size_t count, int datatype, int peer, uintptr_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, uintptr_t comm, uintptr_t stream), ((const void *)local, count, datatype, peer, (void *)peerWin, peerWinOffset, sigIdx, ctx, flags, (void *)comm, (void *)stream)) \
	X(ncclSignal, 22902, comm, CAPI_F_QUEUES, (int peer, int sigIdx, int ctx, unsigned int flags, uintptr_t comm, uintptr_t stream), (peer, sigIdx, ctx, flags, (void *)comm, (void *)stream)) \
	X(ncclWaitSignal, 22902, comm, CAPI_F_QUEUES, (int ndesc, capi_wait_signal_desc *descs, uintptr_t comm, uintptr_t stream), (ndesc, descs, (void *)comm, (void *)stream)) \
	X(ncclGroupStart, 20305, 0, CAPI_F_GROUP_START, (void), ()) \
	X(ncclGroupEnd, 20305, 0, CAPI_F_GROUP_END, (void), ()) \
	X(ncclGroupSimulateEnd, 22203, 0, CAPI_F_GROUP_END, (capi_sim_info * info), (info)) \
	X(ncclDevCommCreate, 22803, comm, CAPI_F_QUEUES, (uintptr_t comm, const void *reqs, capi_devcomm *devcomm), ((void *)comm, reqs, devcomm)) \
	X(ncclDevCommDestroy, 22803, comm, 0, (uintptr_t comm, const capi_devcomm *devcomm), ((void *)comm, devcomm)) \
	X(ncclGetLsaMultimemDevicePointer, 22902, 0, 0, (uintptr_t win, size_t offset, uintptr_t *ptr), ((void *)win, offset, (void **)ptr)) \
	X(ncclGetLsaDevicePointer, 22902, 0, 0, (uintptr_t win, size_t offset, int lsaRank, uintptr_t *ptr), ((void *)win, offset, lsaRank, (void **)ptr)) \
	X(ncclGetPeerDevicePointer, 22902, 0, 0, (uintptr_t win, size_t offset, int peer, uintptr_t *ptr), ((void *)win, offset, peer, (void **)ptr)) \
	X(ncclGetMultimemDeviceLeInfo, 23102, 0, 0, (uintptr_t win, size_t offset, uint32_t *leId, size_t *leOffset), ((void *)win, offset, leId, leOffset)) \
	X(ncclGetPeerDeviceLeInfo, 23102, 0, 0, (uintptr_t win, size_t offset, int peer, uint32_t *leId, size_t *leOffset), ((void *)win, offset, peer, leId, leOffset))

// NCCL functions whose trampolines are written by hand: they return something
// other than ncclResult_t, take a struct by value, or must run with a CUDA
// context current (init, grow of a new rank, memory allocation). The
// parameter API (ncclParam*, param.c: exported from NCCL 2.30.3, declared in
// its header from 2.30.4) returns results in thread-local storage, which its
// trampolines copy inside the same C call; the host team functions
// (ncclTeam*, team.c) return ncclTeam_t or int and take ncclTeam_t by value.
// ncclLLA2ACalcSlots (devres.c) returns an int;
// ncclLsaBarrierCreateRequirement takes ncclTeam_t by value,
// ncclGetMultimemDevicePointer an ncclMultimemHandle_t;
// ncclGinBarrierCreateRequirement (2.28.7) takes ncclTeam_t by value. The
// CFT team functions (ncclTeamCft, ncclTeamCftMultimem: 2.31.2, team.c)
// return ncclTeam_t, and ncclGetCftDeviceLeInfo (2.31.2, team.c) takes one
// by value.
// ncclSetEncryption (2.32.3) has no trampoline: the layout of its
// ncclEncryptionConfig_t is not established, so the binding only reports
// whether the loaded library has it (encryption.go).
// The per-collective config functions (nccl*Config: NCCL 2.31.0, as
// STyGIANet/nccl 2.31.0a16 reports it; 2.31.2) take each collective's
// parameters and a const ncclCollConfig_t*, which their one trampoline
// (collconfig.c) lays out on its own stack for the call.
// X(name, first release as MMmmpp)
#define CAPI_NCCL_SPECIAL_FUNCS(X)                                        \
	X(ncclGetErrorString, 20305)                                      \
	X(ncclGetLastError, 21304)                                        \
	X(ncclCommInitRank, 20305)                                        \
	X(ncclCommInitRankConfig, 21403)                                  \
	X(ncclCommInitRankScalable, 22304)                                \
	X(ncclCommGrow, 22902)                                            \
	X(ncclMemAlloc, 21901)                                            \
	X(ncclParamBind, 23003)                                           \
	X(ncclParamGetI8, 23003)                                          \
	X(ncclParamGetI16, 23003)                                         \
	X(ncclParamGetI32, 23003)                                         \
	X(ncclParamGetI64, 23003)                                         \
	X(ncclParamGetU8, 23003)                                          \
	X(ncclParamGetU16, 23003)                                         \
	X(ncclParamGetU32, 23003)                                         \
	X(ncclParamGetU64, 23003)                                         \
	X(ncclParamGetStr, 23003)                                         \
	X(ncclParamGet, 23003)                                            \
	X(ncclParamGetParameter, 23003)                                   \
	X(ncclParamGetAllParameterKeys, 23003)                            \
	X(ncclParamDumpAll, 23003)                                        \
	X(ncclTeamWorld, 22803)                                           \
	X(ncclTeamLsa, 22803)                                             \
	X(ncclTeamRail, 22803)                                            \
	X(ncclTeamRankToWorld, 22803)                                     \
	X(ncclTeamRankToLsa, 22803)                                       \
	X(ncclAllReduceConfig, 23100)                                     \
	X(ncclBroadcastConfig, 23100)                                     \
	X(ncclReduceConfig, 23100)                                        \
	X(ncclAllGatherConfig, 23100)                                     \
	X(ncclReduceScatterConfig, 23100)                                 \
	X(ncclAlltoAllConfig, 23100)                                      \
	X(ncclGatherConfig, 23100)                                        \
	X(ncclScatterConfig, 23100)                                       \
	X(ncclLLA2ACalcSlots, 22803)                                      \
	X(ncclLsaBarrierCreateRequirement, 22803)                         \
	X(ncclLLA2ACreateRequirement, 22803)                              \
	X(ncclGetMultimemDevicePointer, 22902)                            \
	X(ncclSetEncryption, 23203)                                       \
	X(ncclGinBarrierCreateRequirement, 22807)                         \
	X(ncclTeamCft, 23102)                                             \
	X(ncclTeamCftMultimem, 23102)                                     \
	X(ncclGetCftDeviceLeInfo, 23102)

// The CUDA driver functions the binding calls. All return CUresult.
// X(name, parameters, arguments). The trampoline capi_<name> takes the CUDA
// context to make current first (0: leave the thread's context as it is),
// then the parameters, and returns the CUresult.
#define CAPI_CUDA_FUNCS(X)                                                                                  \
	X(cuDriverGetVersion, (int *version), (version))                                                    \
	X(cuDeviceGet, (int *dev, int ordinal), (dev, ordinal))                                             \
	X(cuDeviceGetCount, (int *count), (count))                                                          \
	X(cuDeviceGetName, (char *name, int len, int dev), (name, len, dev))                                \
	X(cuDeviceGetAttribute, (int *value, int attr, int dev), (value, attr, dev))                        \
	X(cuDeviceTotalMem_v2, (size_t * bytes, int dev), (bytes, dev))                                     \
	X(cuDeviceGetPCIBusId, (char *busid, int len, int dev), (busid, len, dev))                          \
	X(cuDeviceGetUuid_v2, (unsigned char *uuid, int dev), ((void *)uuid, dev))                          \
	X(cuDevicePrimaryCtxRetain, (uintptr_t * ctx, int dev), ((void **)ctx, dev))                        \
	X(cuCtxGetCurrent, (uintptr_t * ctx), ((void **)ctx))                                               \
	X(cuMemGetInfo_v2, (size_t * freeBytes, size_t *totalBytes), (freeBytes, totalBytes))               \
	X(cuStreamCreate, (uintptr_t * stream, unsigned int flags), ((void **)stream, flags))               \
	X(cuStreamDestroy_v2, (uintptr_t stream), ((void *)stream))                                         \
	X(cuStreamSynchronize, (uintptr_t stream), ((void *)stream))                                        \
	X(cuStreamQuery, (uintptr_t stream), ((void *)stream))                                              \
	X(cuEventCreate, (uintptr_t * event, unsigned int flags), ((void **)event, flags))                  \
	X(cuEventDestroy_v2, (uintptr_t event), ((void *)event))                                            \
	X(cuEventRecord, (uintptr_t event, uintptr_t stream), ((void *)event, (void *)stream))              \
	X(cuEventSynchronize, (uintptr_t event), ((void *)event))                                           \
	X(cuEventQuery, (uintptr_t event), ((void *)event))                                                 \
	X(cuEventElapsedTime, (float *ms, uintptr_t start, uintptr_t end), (ms, (void *)start, (void *)end)) \
	X(cuMemAlloc_v2, (uintptr_t * ptr, size_t bytes), (ptr, bytes))                                     \
	X(cuMemFree_v2, (uintptr_t ptr), (ptr))                                                             \
	X(cuMemsetD8_v2, (uintptr_t dst, unsigned char value, size_t n), (dst, value, n))                   \
	X(cuMemsetD8Async, (uintptr_t dst, unsigned char value, size_t n, uintptr_t stream), (dst, value, n, (void *)stream)) \
	X(cuMemcpyHtoD_v2, (uintptr_t dst, const void *src, size_t n), (dst, src, n))                       \
	X(cuMemcpyDtoH_v2, (void *dst, uintptr_t src, size_t n), (dst, src, n))                             \
	X(cuMemcpyDtoD_v2, (uintptr_t dst, uintptr_t src, size_t n), (dst, src, n))                         \
	X(cuMemcpyHtoDAsync_v2, (uintptr_t dst, const void *src, size_t n, uintptr_t stream), (dst, src, n, (void *)stream)) \
	X(cuMemcpyDtoHAsync_v2, (void *dst, uintptr_t src, size_t n, uintptr_t stream), (dst, src, n, (void *)stream)) \
	X(cuMemcpyDtoDAsync_v2, (uintptr_t dst, uintptr_t src, size_t n, uintptr_t stream), (dst, src, n, (void *)stream)) \
	X(cuPointerGetAttribute, (void *data, int attr, uintptr_t ptr), (data, attr, ptr))                 \
	X(cuStreamBeginCapture_v2, (uintptr_t stream, int mode), ((void *)stream, mode))                    \
	X(cuStreamEndCapture, (uintptr_t stream, uintptr_t * graph), ((void *)stream, (void **)graph))      \
	X(cuStreamIsCapturing, (uintptr_t stream, int *status), ((void *)stream, status))                   \
	X(cuStreamGetCaptureInfo_v3, (uintptr_t stream, int *status, uint64_t *id), ((void *)stream, status, id, NULL, NULL, NULL, NULL)) \
	X(cuStreamGetCaptureInfo_v2, (uintptr_t stream, int *status, uint64_t *id), ((void *)stream, status, id, NULL, NULL, NULL)) \
	X(cuGraphInstantiateWithFlags, (uintptr_t * exec, uintptr_t graph, unsigned long long flags), ((void **)exec, (void *)graph, flags)) \
	X(cuGraphLaunch, (uintptr_t exec, uintptr_t stream), ((void *)exec, (void *)stream))                \
	X(cuGraphExecDestroy, (uintptr_t exec), ((void *)exec))                                             \
	X(cuGraphDestroy, (uintptr_t graph), ((void *)graph))                                               \
	CAPI_CUDA_FUNCS_CAPTURE_VMM(X) \
	CAPI_CUDA_KERNEL_FUNCS(X)

// Capture interaction mode of the calling thread (CUDA 10.1) and the virtual
// memory management calls (CUDA 10.2) a test maps memory from several
// chunks with. prop is a CUmemAllocationProp, desc a CUmemAccessDesc.
#define CAPI_CUDA_FUNCS_CAPTURE_VMM(X)                                                                      \
	X(cuThreadExchangeStreamCaptureMode, (int *mode), (mode))                                           \
	X(cuMemGetAllocationGranularity, (size_t * granularity, const void *prop, int option), (granularity, prop, option)) \
	X(cuMemCreate, (uint64_t * handle, size_t size, const void *prop, unsigned long long flags), (handle, size, prop, flags)) \
	X(cuMemRelease, (uint64_t handle), (handle))                                                        \
	X(cuMemAddressReserve, (uintptr_t * ptr, size_t size, size_t align, uintptr_t addr, unsigned long long flags), (ptr, size, align, addr, flags)) \
	X(cuMemAddressFree, (uintptr_t ptr, size_t size), (ptr, size))                                      \
	X(cuMemMap, (uintptr_t ptr, size_t size, size_t offset, uint64_t handle, unsigned long long flags), (ptr, size, offset, handle, flags)) \
	X(cuMemUnmap, (uintptr_t ptr, size_t size), (ptr, size))                                            \
	X(cuMemSetAccess, (uintptr_t ptr, size_t size, const void *desc, size_t count), (ptr, size, desc, count))

// Modules, functions and launches (kernel.c, cuda/module.go, cuda/launch.go).
// cuLaunchKernelEx (CUDA 12.0) and cuFuncGetParamInfo (12.4) may be missing:
// their trampolines then return CAPI_MISSING.
#define CAPI_CUDA_KERNEL_FUNCS(X)                                                                           \
	X(cuModuleLoadDataEx, (uintptr_t * mod, const void *image, unsigned int n, int *opts, void **vals), ((void **)mod, image, n, opts, vals)) \
	X(cuModuleUnload, (uintptr_t mod), ((void *)mod))                                                   \
	X(cuModuleGetFunction, (uintptr_t * fn, uintptr_t mod, const char *name), ((void **)fn, (void *)mod, name)) \
	X(cuFuncGetAttribute, (int *value, int attr, uintptr_t fn), (value, attr, (void *)fn))             \
	X(cuFuncSetAttribute, (uintptr_t fn, int attr, int value), ((void *)fn, attr, value))              \
	X(cuFuncGetParamInfo, (uintptr_t fn, size_t index, size_t *offset, size_t *size), ((void *)fn, index, offset, size)) \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor, (int *blocks, uintptr_t fn, int blockSize, size_t smem), (blocks, (void *)fn, blockSize, smem)) \
	X(cuLaunchKernel, (uintptr_t fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, uintptr_t stream, void **params, void **extra), ((void *)fn, gx, gy, gz, bx, by, bz, smem, (void *)stream, params, extra)) \
	X(cuLaunchCooperativeKernel, (uintptr_t fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, uintptr_t stream, void **params), ((void *)fn, gx, gy, gz, bx, by, bz, smem, (void *)stream, params)) \
	X(cuLaunchKernelEx, (const void *config, uintptr_t fn, void **params, void **extra), (config, (void *)fn, params, extra))

// CUDA functions resolved but called only from inside the shim.
#define CAPI_CUDA_INTERNAL_FUNCS(X) \
	X(cuInit)                   \
	X(cuCtxSynchronize)         \
	X(cuCtxSetCurrent)          \
	X(cuGetErrorName)           \
	X(cuGetErrorString)

// ---------------------------------------------------------------------------
// Symbol table: the index of each NCCL function, in the order of the lists
// (zsyms.go numbers them the same way; a test checks it).
#define CAPI_ENUM_NCCL(name, since, gate, flags, params, args) CAPI_SYM_##name,
#define CAPI_ENUM_NCCL_SPECIAL(name, since) CAPI_SYM_##name,
enum {
	CAPI_NCCL_FUNCS(CAPI_ENUM_NCCL)
	CAPI_NCCL_SPECIAL_FUNCS(CAPI_ENUM_NCCL_SPECIAL)
	CAPI_NCCL_SYM_COUNT
};
#undef CAPI_ENUM_NCCL
#undef CAPI_ENUM_NCCL_SPECIAL

const char *capi_nccl_sym_name(int i);
// capi_nccl_sym_present reports whether the loaded NCCL has function i;
// the Go side asks once per function after loading.
int capi_nccl_sym_present(int i);

// ---------------------------------------------------------------------------
// Loading. Each returns 0 on success; on failure it writes a message to err.
// Loading is idempotent only through the Go side, which serializes it.
int capi_nccl_load(const char *path, char *err, size_t errlen);
// Path of the loaded NCCL (dladdr on ncclGetVersion), or NULL.
const char *capi_nccl_path(void);
int capi_cuda_load(const char *path, char *err, size_t errlen);
const char *capi_cuda_path(void);
// Closes NCCL again (a library the loader rejects after opening it).
void capi_nccl_unload(void);

// ---------------------------------------------------------------------------
// NCCL trampolines.
#define CAPI_PROTO_NCCL(name, since, gate, flags, params, args) capi_status capi_##name params;
CAPI_NCCL_FUNCS(CAPI_PROTO_NCCL)
#undef CAPI_PROTO_NCCL

// The gate asks NCCL for a communicator's state only while communicators
// that NCCL runs non-blocking are alive; the Go side counts them here.
void capi_nonblocking_add(int delta);

// ---------------------------------------------------------------------------
// Groups (group.c, which describes the states).
//
// capi_open_groups: how many threads have a group open. The Go side reads
// it without a cgo call: while it is 0, no thread (the caller's included)
// is inside a group.
extern int capi_open_groups;
// capi_group_depth: the calling thread's group nesting depth.
int capi_group_depth(void);

// capi_group_kept: the blocks (per-collective configs) the calling
// thread's open group keeps until its end (group_keep in group.h).
int capi_group_kept(void);
// capi_group_id: the id of the calling thread's outermost open group
// (distinct for every outermost group of the process), 0 outside a group.
unsigned long long capi_group_id(void);
// The communicators a thread's outermost group used, collected by the gated
// trampolines between ncclGroupStart and the matching ncclGroupEnd. After
// the outermost capi_ncclGroupEnd (or GroupSimulateEnd), capi_group_take
// copies up to max of them into out and clears the list; it returns how many
// there were. Call it on the same thread.
int capi_group_take(uintptr_t *out, int max);
// capi_group_held: how many threads' groups hold work of comm, from the
// group's first call that queues work on comm until capi_group_release
// after its end. capi_group_records: how many communicators the table
// holds a record of (held or orphaned).
int capi_group_held(uintptr_t comm);
int capi_group_records(void);
// capi_group_orphaned: a thread ended inside a group holding comm's work.
int capi_group_orphaned(uintptr_t comm);
// capi_group_take does not release the holds of the communicators it
// returns: capi_group_release does, once the Go side recorded the group's
// end. capi_group_forget drops every record of a freed communicator.
void capi_group_release(const uintptr_t *comms, int n);
void capi_group_forget(uintptr_t comm);
// capi_group_mark marks the calling thread's innermost group level as
// opened by a manual GroupStart; capi_group_inner_manual reports whether it
// was (1 deeper than 64 levels, where levels are not tracked).
void capi_group_mark(void);
int capi_group_inner_manual(void);

// ---------------------------------------------------------------------------
// Hand-written NCCL trampolines.
const char *capi_ncclGetErrorString(int result);
// A malloc'd copy of ncclGetLastError, or NULL.
char *capi_ncclGetLastError(void);
// The InitRank family, grow of a new rank and ncclMemAlloc bind to the
// calling thread's current device: they make ctx current, call, and restore
// the thread's previous context, all in one C call.
capi_status capi_ncclCommInitRankConfig(uintptr_t ctx, uintptr_t *comm, int nranks, const capi_unique_id *id, int rank,
					capi_config_v23203 *config);
capi_status capi_ncclCommInitRankScalable(uintptr_t ctx, uintptr_t *comm, int nranks, int rank, int nids,
					  capi_unique_id *ids, capi_config_v23203 *config);
capi_status capi_ncclCommGrow(uintptr_t ctx, uintptr_t comm, int nranks, const capi_unique_id *id, int rank,
			      uintptr_t *newcomm, capi_config_v23203 *config);
capi_status capi_ncclMemAlloc(uintptr_t ctx, uintptr_t *ptr, size_t size);

// For the hand-written trampolines of other files (param.c, team.c):
// capi_nccl_fn is the loaded NCCL's function i (a CAPI_SYM_ index), or
// NULL; capi_nccl_missing is the code for a NULL one (CAPI_MISSING, or
// CAPI_NOT_LOADED while no NCCL is loaded); capi_gate is a gated call's
// check for a communicator (0, or CAPI_PENDING while its previous operation
// is in progress), for a call that queues no work.
void *capi_nccl_fn(int i);
int capi_nccl_missing(void);
// capi_nccl_status is the status of an NCCL call's result: its last error
// as detail unless it is ncclSuccess or ncclInProgress.
capi_status capi_nccl_status(int code);
int capi_gate(uintptr_t comm);
// capi_gate_queue is the gate of a call that queues work (a collective of
// collconfig.c): capi_gate's check, plus the group rules of group.c.
int capi_gate_queue(uintptr_t comm);

// Benchmarks (the root package's BenchmarkAllReduceHostPath, capi's
// BenchmarkTrampoline). capi_bench_allreduce_loop is the host loop written
// in C: iters in-place all-reduces, each a direct call of ncclAllReduce.
// capi_bench_floor does nothing: one cgo call to it is the floor under any
// call of the binding.
capi_status capi_bench_allreduce_loop(uintptr_t buf, size_t count, int datatype, uintptr_t comm, uintptr_t stream,
				      long iters);
int capi_bench_floor(void);

// capi_bench_set_lock_each, capi_bench_after_call: see shim.c.
void capi_bench_set_lock_each(int on);
void capi_bench_after_call(void);

// capi_ctx_swap: see shim.c.
int capi_ctx_swap(uintptr_t ctx, uintptr_t *prev);

// capi_wait_streams is nccl-tests' testStreamSynchronize in one C call: it
// polls the n streams not yet marked in done (cuStreamQuery, each with its
// context ctxs[i] made current, 0: the thread's), marking those that are
// done; while one is busy it asks its communicator comms[i] (0: none) for
// an asynchronous error (ncclCommGetAsyncError; ncclInProgress is no
// error), then gives the core away (sched_yield), until every stream is
// done (CAPI_WAIT_DONE), slice_ns nanoseconds have passed (CAPI_WAIT_SLICE:
// the caller checks its context and deadline and calls again), a query
// fails (CAPI_WAIT_CUDA: *code is the CUresult, *which the stream) or a
// communicator reports an error (CAPI_WAIT_NCCL: *code the ncclResult_t
// of the call or the asynchronous state, *which the communicator).
enum {
	CAPI_WAIT_DONE = 1, // not 0: the !cgo stub's zero means nothing was waited for
	CAPI_WAIT_SLICE = 2,
	CAPI_WAIT_CUDA = 3,
	CAPI_WAIT_NCCL = 4,
};
int capi_wait_streams(int n, const uintptr_t *ctxs, const uintptr_t *streams, const uintptr_t *comms,
		      unsigned char *done, long long slice_ns, int *which, int *code);

// ---------------------------------------------------------------------------
// CUDA trampolines.
#define CAPI_UNPAREN(...) __VA_ARGS__
#define CAPI_PROTO_CUDA(name, params, args) int capi_##name(uintptr_t capi_ctx_, CAPI_UNPAREN params);
CAPI_CUDA_FUNCS(CAPI_PROTO_CUDA)
#undef CAPI_PROTO_CUDA
int capi_cuCtxSynchronize(uintptr_t ctx);
int capi_cuInit(void);
int capi_cuGetErrorName(int code, const char **name);
int capi_cuGetErrorString(int code, const char **text);

#endif
