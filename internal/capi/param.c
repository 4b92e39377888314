// nccl4go C shim: NCCL's parameter API. See param.h.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "param.h"
#include "shim.h"

int capi_param_bind(const char *key, uintptr_t *h) {
	typedef int (*fn_t)(void **, const char *);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclParamBind);
	if (!f) {
		return capi_nccl_missing();
	}
	void *p = NULL;
	int r = f(&p, key);
	*h = (uintptr_t)p;
	return r;
}

int capi_param_get_int(int kind, uintptr_t h, uint64_t *out) {
	static const int syms[CAPI_PARAM_KINDS] = {
		CAPI_SYM_ncclParamGetI8,  CAPI_SYM_ncclParamGetI16, CAPI_SYM_ncclParamGetI32, CAPI_SYM_ncclParamGetI64,
		CAPI_SYM_ncclParamGetU8,  CAPI_SYM_ncclParamGetU16, CAPI_SYM_ncclParamGetU32, CAPI_SYM_ncclParamGetU64,
	};
	if (kind < 0 || kind >= CAPI_PARAM_KINDS) {
		return 4; // ncclInvalidArgument
	}
	typedef int (*fn_t)(void *, void *);
	fn_t f = (fn_t)capi_nccl_fn(syms[kind]);
	if (!f) {
		return capi_nccl_missing();
	}
	union {
		int8_t i8;
		int16_t i16;
		int32_t i32;
		int64_t i64;
		uint8_t u8;
		uint16_t u16;
		uint32_t u32;
		uint64_t u64;
	} v;
	memset(&v, 0, sizeof v);
	int r = f((void *)h, &v);
	if (r) {
		return r;
	}
	switch (kind) {
	case CAPI_PARAM_I8: *out = (uint64_t)(int64_t)v.i8; break;
	case CAPI_PARAM_I16: *out = (uint64_t)(int64_t)v.i16; break;
	case CAPI_PARAM_I32: *out = (uint64_t)(int64_t)v.i32; break;
	case CAPI_PARAM_I64: *out = (uint64_t)v.i64; break;
	case CAPI_PARAM_U8: *out = v.u8; break;
	case CAPI_PARAM_U16: *out = v.u16; break;
	case CAPI_PARAM_U32: *out = v.u32; break;
	default: *out = v.u64; break;
	}
	return 0;
}

int capi_param_get_raw(uintptr_t h, void *out, int maxlen, int *len) {
	typedef int (*fn_t)(void *, void *, int, int *);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclParamGet);
	if (!f) {
		return capi_nccl_missing();
	}
	*len = 0;
	return f((void *)h, out, maxlen, len);
}

// dup_n copies n bytes of s and a NUL; NULL stays NULL.
static char *dup_n(const char *s, size_t n) {
	if (!s) {
		return NULL;
	}
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

int capi_param_get_str(uintptr_t h, char **out) {
	typedef int (*fn_t)(void *, const char **);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclParamGetStr);
	*out = NULL;
	if (!f) {
		return capi_nccl_missing();
	}
	const char *s = NULL;
	int r = f((void *)h, &s);
	if (r == 0 && s) {
		*out = dup_n(s, strlen(s));
	}
	return r;
}

int capi_param_get_parameter(const char *key, char **out, int *len) {
	typedef int (*fn_t)(const char *, const char **, int *);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclParamGetParameter);
	*out = NULL;
	*len = 0;
	if (!f) {
		return capi_nccl_missing();
	}
	const char *s = NULL;
	int n = 0;
	int r = f(key, &s, &n);
	if (r == 0 && s) {
		*out = dup_n(s, n > 0 ? (size_t)n : 0);
		*len = n;
	}
	return r;
}

int capi_param_keys(char **out, int *n, size_t *bytes) {
	typedef int (*fn_t)(const char ***, int *);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclParamGetAllParameterKeys);
	*out = NULL;
	*n = 0;
	*bytes = 0;
	if (!f) {
		return capi_nccl_missing();
	}
	const char **table = NULL;
	int len = 0;
	int r = f(&table, &len);
	if (r || len <= 0 || !table) {
		return r;
	}
	size_t total = 0;
	for (int i = 0; i < len; i++) {
		total += (table[i] ? strlen(table[i]) : 0) + 1;
	}
	char *buf = malloc(total);
	if (!buf) {
		return 3; // ncclInternalError: no memory
	}
	char *p = buf;
	for (int i = 0; i < len; i++) {
		size_t k = table[i] ? strlen(table[i]) : 0;
		memcpy(p, table[i] ? table[i] : "", k);
		p[k] = 0;
		p += k + 1;
	}
	*out = buf;
	*n = len;
	*bytes = total;
	return 0;
}

int capi_param_dump_all(void) {
	typedef void (*fn_t)(void);
	fn_t f = (fn_t)capi_nccl_fn(CAPI_SYM_ncclParamDumpAll);
	if (!f) {
		return capi_nccl_missing();
	}
	fflush(stdout);
	f();
	fflush(stdout);
	return 0;
}
