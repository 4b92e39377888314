// fakenvrtc.c: a fake NVRTC (libnvrtc.so) for nccl4go's CPU-only tests.
//
// It "compiles" CUDA C++ into a fake module that the fake CUDA driver loads
// (see the module format in fakecuda.c): a first line
//   FAKECUBIN arch=sm_90   (FAKEPTX arch=compute_90; FAKELTOIR arch=... with
//   -dlto, which the fake driver refuses and the fake nvJitLink links)
// then "kernel NAME ..." for each line "// fake-kernel: NAME ..." of the
// source, and "kernel NAME" for every other `__global__ void NAME(`, then
// "define NAME=VALUE" for each -D option. Rules modelled on NVRTC:
//   - every option starts with '-' (else NVRTC_ERROR_INVALID_OPTION);
//   - "#error" in the source fails with NVRTC_ERROR_COMPILATION and a log
//     "NAME(LINE): error: #error directive: ...";
//   - #include <F> or "F" must be found in a -I / --include-path directory
//     (else a compilation error "cannot open source file");
//   - nvrtcGetCUBIN needs a real architecture (-arch=sm_XX), nvrtcGetLTOIR
//     needs -dlto (else NVRTC_ERROR_INVALID_INPUT).
// Knobs: FAKE_NVRTC_VERSION (major*1000+minor*10, default 13000);
// FAKE_NVRTC_COUNT_FILE: a line is appended to that file per compilation.
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum {
	NVRTC_SUCCESS = 0,
	NVRTC_ERROR_OUT_OF_MEMORY = 1,
	NVRTC_ERROR_INVALID_INPUT = 3,
	NVRTC_ERROR_INVALID_PROGRAM = 4,
	NVRTC_ERROR_INVALID_OPTION = 5,
	NVRTC_ERROR_COMPILATION = 6,
};

struct prog {
	char *src;
	char *name;
	char *log;
	char *out;
	int compiled;
	int real_arch;
	int lto;
};

EXPORT const char *nvrtcGetErrorString(int r) {
	switch (r) {
	case NVRTC_SUCCESS:
		return "NVRTC_SUCCESS";
	case NVRTC_ERROR_OUT_OF_MEMORY:
		return "NVRTC_ERROR_OUT_OF_MEMORY";
	case NVRTC_ERROR_INVALID_INPUT:
		return "NVRTC_ERROR_INVALID_INPUT";
	case NVRTC_ERROR_INVALID_PROGRAM:
		return "NVRTC_ERROR_INVALID_PROGRAM";
	case NVRTC_ERROR_INVALID_OPTION:
		return "NVRTC_ERROR_INVALID_OPTION";
	case NVRTC_ERROR_COMPILATION:
		return "NVRTC_ERROR_COMPILATION";
	}
	return "NVRTC_ERROR unknown";
}

EXPORT int nvrtcVersion(int *major, int *minor) {
	if (!major || !minor) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	const char *v = getenv("FAKE_NVRTC_VERSION");
	int n = v ? atoi(v) : 13000;
	*major = n / 1000;
	*minor = n % 1000 / 10;
	return NVRTC_SUCCESS;
}

EXPORT int nvrtcCreateProgram(struct prog **p, const char *src, const char *name, int nheaders, const char *const *h,
			      const char *const *names) {
	(void)h, (void)names;
	if (!p || !src || nheaders < 0) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	struct prog *g = calloc(1, sizeof *g);
	g->src = strdup(src);
	g->name = strdup(name ? name : "default_program");
	*p = g;
	return NVRTC_SUCCESS;
}

EXPORT int nvrtcDestroyProgram(struct prog **p) {
	if (!p || !*p) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
	free((*p)->src);
	free((*p)->name);
	free((*p)->log);
	free((*p)->out);
	free(*p);
	*p = NULL;
	return NVRTC_SUCCESS;
}

static void appendf(char **buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void appendf(char **buf, const char *fmt, ...) {
	char *add = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&add, fmt, ap) < 0) {
		add = NULL;
	}
	va_end(ap);
	if (!add) {
		return;
	}
	size_t a = *buf ? strlen(*buf) : 0, b = strlen(add);
	*buf = realloc(*buf, a + b + 1);
	memcpy(*buf + a, add, b + 1);
	free(add);
}

static int found(const char *file, int nopts, const char *const *opts) {
	for (int i = 0; i < nopts; i++) {
		const char *dir = NULL;
		if (strncmp(opts[i], "-I", 2) == 0) {
			dir = opts[i] + 2;
		} else if (strncmp(opts[i], "--include-path=", 15) == 0) {
			dir = opts[i] + 15;
		}
		if (dir) {
			char path[4096];
			snprintf(path, sizeof path, "%s/%s", dir, file);
			if (access(path, R_OK) == 0) {
				return 1;
			}
		}
	}
	return 0;
}

EXPORT int nvrtcCompileProgram(struct prog *p, int nopts, const char *const *opts) {
	if (!p) {
		return NVRTC_ERROR_INVALID_PROGRAM;
	}
	const char *count = getenv("FAKE_NVRTC_COUNT_FILE");
	if (count) {
		FILE *f = fopen(count, "a");
		if (f) {
			fprintf(f, "compile %s\n", p->name);
			fclose(f);
		}
	}
	const char *arch = "compute_52";
	for (int i = 0; i < nopts; i++) {
		if (!opts[i] || opts[i][0] != '-') {
			appendf(&p->log, "nvrtc: error: invalid option \"%s\"\n", opts[i] ? opts[i] : "(null)");
			return NVRTC_ERROR_INVALID_OPTION;
		}
		if (strncmp(opts[i], "-arch=", 6) == 0) {
			arch = opts[i] + 6;
		} else if (strncmp(opts[i], "--gpu-architecture=", 19) == 0) {
			arch = opts[i] + 19;
		} else if (strcmp(opts[i], "-dlto") == 0) {
			p->lto = 1;
		}
	}
	p->real_arch = strncmp(arch, "sm_", 3) == 0;
	int line = 0, failed = 0;
	char *body = NULL;
	for (const char *l = p->src; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		line++;
		size_t len = strcspn(l, "\n");
		const char *s = l;
		while (*s == ' ' || *s == '\t') {
			s++;
		}
		if (strncmp(s, "#error", 6) == 0) {
			appendf(&p->log, "%s(%d): error: #error directive: %.*s\n", p->name, line, (int)(len - (s - l) - 6),
				s + 6);
			failed = 1;
		} else if (strncmp(s, "#include", 8) == 0) {
			const char *a = strpbrk(s, "<\"");
			if (a) {
				size_t n = strcspn(a + 1, ">\"");
				char file[1024];
				snprintf(file, sizeof file, "%.*s", (int)n, a + 1);
				if (!found(file, nopts, opts)) {
					appendf(&p->log, "%s(%d): catastrophic error: cannot open source file \"%s\"\n",
						p->name, line, file);
					failed = 1;
				}
			}
		} else if (strncmp(s, "// fake-kernel:", 15) == 0) {
			appendf(&body, "kernel%.*s\n", (int)(len - (s - l) - 15), s + 15);
		} else {
			const char *g = strstr(s, "__global__ void ");
			if (g && g < l + len) {
				const char *name = g + 16;
				size_t n = strcspn(name, "( \n");
				char key[256];
				snprintf(key, sizeof key, "kernel %.*s", (int)n, name);
				if (!body || !strstr(body, key)) {
					appendf(&body, "%s\n", key);
				}
			}
		}
	}
	if (failed) {
		appendf(&p->log, "%d errors detected in the compilation of \"%s\".\n", failed, p->name);
		free(body);
		return NVRTC_ERROR_COMPILATION;
	}
	free(p->out);
	p->out = NULL;
	appendf(&p->out, "%s arch=%s\n%s", p->lto ? "FAKELTOIR" : (p->real_arch ? "FAKECUBIN" : "FAKEPTX"), arch,
		body ? body : "");
	for (int i = 0; i < nopts; i++) {
		if (strncmp(opts[i], "-D", 2) == 0) {
			appendf(&p->out, "define %s\n", opts[i] + 2);
		}
	}
	free(body);
	p->compiled = 1;
	return NVRTC_SUCCESS;
}

EXPORT int nvrtcGetProgramLogSize(struct prog *p, size_t *n) {
	if (!p || !n) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	*n = (p->log ? strlen(p->log) : 0) + 1;
	return NVRTC_SUCCESS;
}

EXPORT int nvrtcGetProgramLog(struct prog *p, char *buf) {
	if (!p || !buf) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	strcpy(buf, p->log ? p->log : "");
	return NVRTC_SUCCESS;
}

static int out_size(struct prog *p, size_t *n, int ok) {
	if (!p || !n) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	if (!p->compiled || !ok) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	*n = strlen(p->out) + 1;
	return NVRTC_SUCCESS;
}

static int out_copy(struct prog *p, char *buf, int ok) {
	if (!p || !buf || !p->compiled || !ok) {
		return NVRTC_ERROR_INVALID_INPUT;
	}
	strcpy(buf, p->out);
	return NVRTC_SUCCESS;
}

EXPORT int nvrtcGetPTXSize(struct prog *p, size_t *n) { return out_size(p, n, p && !p->lto); }
EXPORT int nvrtcGetPTX(struct prog *p, char *b) { return out_copy(p, b, p && !p->lto); }
EXPORT int nvrtcGetCUBINSize(struct prog *p, size_t *n) { return out_size(p, n, p && p->real_arch && !p->lto); }
EXPORT int nvrtcGetCUBIN(struct prog *p, char *b) { return out_copy(p, b, p && p->real_arch && !p->lto); }
EXPORT int nvrtcGetLTOIRSize(struct prog *p, size_t *n) { return out_size(p, n, p && p->lto); }
EXPORT int nvrtcGetLTOIR(struct prog *p, char *b) { return out_copy(p, b, p && p->lto); }
