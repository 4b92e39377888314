// nccl4go C shim: NCCL's parameter API (ncclParam*, exported from NCCL
// 2.30.3). NCCL returns strings and key tables in thread-local storage,
// valid until the next call of the same function on the same thread: these
// trampolines copy them into malloc'd memory inside the same C call, so a
// goroutine moving between threads never reads another call's result.
// Each returns the ncclResult_t, or CAPI_MISSING / CAPI_NOT_LOADED. No
// ncclGetLastError detail is taken: the parameter API logs at INFO level
// only, so the process-wide last error would describe something else.
#ifndef NCCL4GO_PARAM_H
#define NCCL4GO_PARAM_H

#include <stddef.h>
#include <stdint.h>

// The typed getters, in the order of capi_param_get_int's kind.
enum {
	CAPI_PARAM_I8,
	CAPI_PARAM_I16,
	CAPI_PARAM_I32,
	CAPI_PARAM_I64,
	CAPI_PARAM_U8,
	CAPI_PARAM_U16,
	CAPI_PARAM_U32,
	CAPI_PARAM_U64,
	CAPI_PARAM_KINDS,
};

// ncclParamBind: *h is the parameter's handle (valid for the process).
int capi_param_bind(const char *key, uintptr_t *h);
// ncclParamGet<kind>: the value, sign- or zero-extended to 64 bits.
int capi_param_get_int(int kind, uintptr_t h, uint64_t *out);
// ncclParamGet: the raw bytes (at most maxlen), *len how many.
int capi_param_get_raw(uintptr_t h, void *out, int maxlen, int *len);
// ncclParamGetStr: *out a malloc'd copy (NULL if NCCL returned NULL).
int capi_param_get_str(uintptr_t h, char **out);
// ncclParamGetParameter: *out a malloc'd copy of the value text, *len its
// length (NCCL's valueLen).
int capi_param_get_parameter(const char *key, char **out, int *len);
// ncclParamGetAllParameterKeys: *out one malloc'd buffer holding the *n
// keys, each NUL-terminated, *bytes its size.
int capi_param_keys(char **out, int *n, size_t *bytes);
// ncclParamDumpAll (to the process's standard output, which is flushed).
int capi_param_dump_all(void);

#endif
