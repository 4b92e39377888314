// nccl4go C shim: NVRTC and nvJitLink, opened at run time (nvrtc.c).
#ifndef NCCL4GO_NVRTC_H
#define NCCL4GO_NVRTC_H

#include <stddef.h>

// capi_nvrtc_load opens NVRTC at path; 0 on success, else a message in err.
int capi_nvrtc_load(const char *path, char *err, size_t errlen);
const char *capi_nvrtc_path(void);
int capi_nvrtc_version(int *major, int *minor);

// capi_nvrtc_compile compiles src (nvrtcCreateProgram, nvrtcCompileProgram)
// and fetches output (0 PTX, 1 CUBIN, 2 LTO-IR) into *out (malloc'd, *outlen
// bytes) and the log into *log (malloc'd, NUL-terminated, or NULL). It
// returns the nvrtcResult of the step that failed (*stage: 1 create, 2
// compile, 3 output), 0 on success, or -1 when NVRTC is not loaded or lacks
// a function (its name in *missing).
int capi_nvrtc_compile(const char *src, const char *name, int nopts, const char **opts, int output, char **out,
		       size_t *outlen, char **log, int *stage, const char **missing);
const char *capi_nvrtc_error_string(int code);

// nvJitLink: the same shape. inputs are ninputs (type, data, size) triples.
int capi_nvjitlink_load(const char *path, char *err, size_t errlen);
const char *capi_nvjitlink_path(void);
int capi_nvjitlink_link(int nopts, const char **opts, int ninputs, const int *types, const void *const *datas,
			const size_t *sizes, char **out, size_t *outlen, char **log, int *stage, const char **missing);

#endif
