// nccl4go C shim: NVRTC and nvJitLink. See nvrtc.h.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc.h"

typedef void *prog_t;

static void *nvrtc;
static struct {
	int (*version)(int *, int *);
	int (*create)(prog_t *, const char *, const char *, int, const char *const *, const char *const *);
	int (*compile)(prog_t, int, const char *const *);
	int (*log_size)(prog_t, size_t *);
	int (*log)(prog_t, char *);
	int (*size[3])(prog_t, size_t *);
	int (*get[3])(prog_t, char *);
	int (*destroy)(prog_t *);
	const char *(*error_string)(int);
} rtc;

static void *open_sym(void *h, const char *name) { return h ? dlsym(h, name) : NULL; }

// open_once dlopens path unless loaded (the library's handle, what names
// it) is already set; NULL, with err set, when it cannot.
static void *open_once(void *loaded, const char *what, const char *path, char *err, size_t errlen) {
	if (loaded) {
		snprintf(err, errlen, "%s is already loaded", what);
		return NULL;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
	}
	return h;
}

int capi_nvrtc_load(const char *path, char *err, size_t errlen) {
	void *h = open_once(nvrtc, "NVRTC", path, err, errlen);
	if (!h) {
		return -1;
	}
	if (!dlsym(h, "nvrtcCompileProgram")) {
		snprintf(err, errlen, "%s: has no nvrtcCompileProgram", path);
		dlclose(h);
		return -1;
	}
	rtc.version = open_sym(h, "nvrtcVersion");
	rtc.create = open_sym(h, "nvrtcCreateProgram");
	rtc.compile = open_sym(h, "nvrtcCompileProgram");
	rtc.log_size = open_sym(h, "nvrtcGetProgramLogSize");
	rtc.log = open_sym(h, "nvrtcGetProgramLog");
	rtc.size[0] = open_sym(h, "nvrtcGetPTXSize");
	rtc.get[0] = open_sym(h, "nvrtcGetPTX");
	rtc.size[1] = open_sym(h, "nvrtcGetCUBINSize");
	rtc.get[1] = open_sym(h, "nvrtcGetCUBIN");
	rtc.size[2] = open_sym(h, "nvrtcGetLTOIRSize");
	rtc.get[2] = open_sym(h, "nvrtcGetLTOIR");
	rtc.destroy = open_sym(h, "nvrtcDestroyProgram");
	rtc.error_string = open_sym(h, "nvrtcGetErrorString");
	nvrtc = h;
	return 0;
}

static const char *path_of(void *sym) {
	Dl_info info;
	return (sym && dladdr(sym, &info)) ? info.dli_fname : NULL;
}

const char *capi_nvrtc_path(void) { return path_of((void *)rtc.compile); }

int capi_nvrtc_version(int *major, int *minor) { return rtc.version ? rtc.version(major, minor) : -1; }

const char *capi_nvrtc_error_string(int code) { return rtc.error_string ? rtc.error_string(code) : NULL; }

int capi_nvrtc_compile(const char *src, const char *name, int nopts, const char **opts, int output, char **out,
		       size_t *outlen, char **log, int *stage, const char **missing) {
	*out = NULL, *log = NULL, *outlen = 0, *stage = 0, *missing = NULL;
	if (!nvrtc) {
		*missing = "NVRTC";
		return -1;
	}
	if (output < 0 || output > 2) {
		*missing = "an output kind";
		return -1;
	}
	if (!rtc.create || !rtc.compile || !rtc.destroy || !rtc.log_size || !rtc.log) {
		*missing = "nvrtcCreateProgram";
		return -1;
	}
	if (!rtc.size[output] || !rtc.get[output]) {
		static const char *const names[3] = {"nvrtcGetPTX", "nvrtcGetCUBIN", "nvrtcGetLTOIR"};
		*missing = names[output];
		return -1;
	}
	prog_t p = NULL;
	*stage = 1;
	int r = rtc.create(&p, src, name, 0, NULL, NULL);
	if (r) {
		return r;
	}
	*stage = 2;
	r = rtc.compile(p, nopts, opts);
	size_t n = 0;
	if (rtc.log_size(p, &n) == 0 && n > 1) {
		*log = malloc(n);
		if (*log && rtc.log(p, *log) != 0) {
			free(*log);
			*log = NULL;
		}
	}
	if (r == 0) {
		*stage = 3;
		r = rtc.size[output](p, &n);
		if (r == 0) {
			*out = malloc(n ? n : 1);
			r = *out ? rtc.get[output](p, *out) : 1; // NVRTC_ERROR_OUT_OF_MEMORY
			if (r == 0) {
				*outlen = n;
			}
		}
	}
	rtc.destroy(&p);
	return r;
}

static void *jl;
static struct {
	int (*create)(void **, unsigned, const char **);
	int (*add)(void *, int, const void *, size_t, const char *);
	int (*complete)(void *);
	int (*cubin_size)(void *, size_t *);
	int (*cubin)(void *, void *);
	int (*log_size)(void *, size_t *);
	int (*log)(void *, char *);
	int (*destroy)(void **);
} link;

static void *jl_sym(void *h, const char *name) {
	void *p = dlsym(h, name);
	static const char *const versions[] = {"13_0", "12_0"};
	for (size_t i = 0; !p && i < sizeof versions / sizeof versions[0]; i++) {
		char buf[128];
		snprintf(buf, sizeof buf, "__%s_%s", name, versions[i]);
		p = dlsym(h, buf);
	}
	return p;
}

int capi_nvjitlink_load(const char *path, char *err, size_t errlen) {
	void *h = open_once(jl, "nvJitLink", path, err, errlen);
	if (!h) {
		return -1;
	}
	// The header maps each name to a versioned symbol
	// (__nvJitLinkCreate_12_0, ...): try the plain name, then those.
	link.create = jl_sym(h, "nvJitLinkCreate");
	link.add = jl_sym(h, "nvJitLinkAddData");
	link.complete = jl_sym(h, "nvJitLinkComplete");
	link.cubin_size = jl_sym(h, "nvJitLinkGetLinkedCubinSize");
	link.cubin = jl_sym(h, "nvJitLinkGetLinkedCubin");
	link.log_size = jl_sym(h, "nvJitLinkGetErrorLogSize");
	link.log = jl_sym(h, "nvJitLinkGetErrorLog");
	link.destroy = jl_sym(h, "nvJitLinkDestroy");
	if (!link.create || !link.add || !link.complete || !link.cubin_size || !link.cubin || !link.destroy) {
		snprintf(err, errlen, "%s: lacks the nvJitLink entry points", path);
		dlclose(h);
		memset(&link, 0, sizeof link);
		return -1;
	}
	jl = h;
	return 0;
}

const char *capi_nvjitlink_path(void) { return path_of((void *)link.create); }

int capi_nvjitlink_link(int nopts, const char **opts, int ninputs, const int *types, const void *const *datas,
			const size_t *sizes, char **out, size_t *outlen, char **log, int *stage, const char **missing) {
	*out = NULL, *log = NULL, *outlen = 0, *stage = 0, *missing = NULL;
	if (!jl) {
		*missing = "nvJitLink";
		return -1;
	}
	void *h = NULL;
	*stage = 1;
	int r = link.create(&h, (unsigned)nopts, opts);
	if (r) {
		return r;
	}
	*stage = 2;
	for (int i = 0; i < ninputs && r == 0; i++) {
		r = link.add(h, types[i], datas[i], sizes[i], "input");
	}
	if (r == 0) {
		*stage = 3;
		r = link.complete(h);
	}
	size_t n = 0;
	if (r && link.log_size && link.log && link.log_size(h, &n) == 0 && n > 1) {
		*log = malloc(n);
		if (*log && link.log(h, *log) != 0) {
			free(*log);
			*log = NULL;
		}
	}
	if (r == 0) {
		*stage = 4;
		r = link.cubin_size(h, &n);
		if (r == 0) {
			*out = malloc(n ? n : 1);
			r = *out ? link.cubin(h, *out) : -1;
			if (r == 0) {
				*outlen = n;
			}
		}
	}
	link.destroy(&h);
	return r;
}
