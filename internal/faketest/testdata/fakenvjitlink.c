// fakenvjitlink.c: a fake nvJitLink (libnvJitLink.so) for nccl4go's
// CPU-only tests. It "links" the fake modules the fake NVRTC writes: the
// output is "FAKECUBIN linked arch=sm_XY" followed by every input's lines
// after its first, which the fake CUDA driver loads. Rules modelled on
// nvJitLink: options must include -arch=sm_XY (else
// NVJITLINK_ERROR_MISSING_ARCH); an input that is not a fake module fails
// at nvJitLinkAddData (NVJITLINK_ERROR_INVALID_INPUT, with an error log);
// LTO-IR inputs need the -lto option.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum {
	NVJITLINK_SUCCESS = 0,
	NVJITLINK_ERROR_UNRECOGNIZED_OPTION = 1,
	NVJITLINK_ERROR_MISSING_ARCH = 2,
	NVJITLINK_ERROR_INVALID_INPUT = 3,
	NVJITLINK_ERROR_INTERNAL = 6,
	INPUT_LTOIR = 3,
};

struct link {
	char arch[32];
	int lto;
	char *out;
	char *log;
	int complete;
};

static void append(char **buf, const char *s, size_t n) {
	size_t a = *buf ? strlen(*buf) : 0;
	*buf = realloc(*buf, a + n + 1);
	memcpy(*buf + a, s, n);
	(*buf)[a + n] = 0;
}

EXPORT int nvJitLinkCreate(struct link **h, unsigned n, const char **opts) {
	if (!h) {
		return NVJITLINK_ERROR_INTERNAL;
	}
	struct link *l = calloc(1, sizeof *l);
	for (unsigned i = 0; i < n; i++) {
		if (strncmp(opts[i], "-arch=sm_", 9) == 0) {
			snprintf(l->arch, sizeof l->arch, "%s", opts[i] + 6);
		} else if (strcmp(opts[i], "-lto") == 0) {
			l->lto = 1;
		} else if (opts[i][0] != '-') {
			free(l);
			return NVJITLINK_ERROR_UNRECOGNIZED_OPTION;
		}
	}
	if (!l->arch[0]) {
		free(l);
		return NVJITLINK_ERROR_MISSING_ARCH;
	}
	*h = l;
	return NVJITLINK_SUCCESS;
}

EXPORT int nvJitLinkAddData(struct link *l, int type, const void *data, size_t size, const char *name) {
	(void)name;
	const char *s = data;
	if (!l || !s || size < 4 || strncmp(s, "FAKE", 4) != 0 || (type == INPUT_LTOIR && !l->lto)) {
		const char *why = type == INPUT_LTOIR && l && !l->lto ? "LTO-IR input without -lto" : "not a fake module";
		char msg[128];
		snprintf(msg, sizeof msg, "ERROR 3: input %s: %s\n", name ? name : "?", why);
		if (l) {
			append(&l->log, msg, strlen(msg));
		}
		return NVJITLINK_ERROR_INVALID_INPUT;
	}
	const char *nl = memchr(s, '\n', size);
	if (nl) {
		size_t rest = size - (size_t)(nl + 1 - s);
		while (rest && s[size - 1] == 0) { // the fake NVRTC's NUL
			rest--, size--;
		}
		append(&l->out, nl + 1, rest);
	}
	return NVJITLINK_SUCCESS;
}

EXPORT int nvJitLinkComplete(struct link *l) {
	if (!l) {
		return NVJITLINK_ERROR_INTERNAL;
	}
	char head[64];
	snprintf(head, sizeof head, "FAKECUBIN linked arch=%s\n", l->arch);
	char *out = NULL;
	append(&out, head, strlen(head));
	if (l->out) {
		append(&out, l->out, strlen(l->out));
	}
	free(l->out);
	l->out = out;
	l->complete = 1;
	return NVJITLINK_SUCCESS;
}

EXPORT int nvJitLinkGetLinkedCubinSize(struct link *l, size_t *n) {
	if (!l || !n || !l->complete) {
		return NVJITLINK_ERROR_INTERNAL;
	}
	*n = strlen(l->out) + 1;
	return NVJITLINK_SUCCESS;
}

EXPORT int nvJitLinkGetLinkedCubin(struct link *l, void *buf) {
	if (!l || !buf || !l->complete) {
		return NVJITLINK_ERROR_INTERNAL;
	}
	strcpy(buf, l->out);
	return NVJITLINK_SUCCESS;
}

EXPORT int nvJitLinkGetErrorLogSize(struct link *l, size_t *n) {
	if (!l || !n) {
		return NVJITLINK_ERROR_INTERNAL;
	}
	*n = (l->log ? strlen(l->log) : 0) + 1;
	return NVJITLINK_SUCCESS;
}

EXPORT int nvJitLinkGetErrorLog(struct link *l, char *buf) {
	if (!l || !buf) {
		return NVJITLINK_ERROR_INTERNAL;
	}
	strcpy(buf, l->log ? l->log : "");
	return NVJITLINK_SUCCESS;
}

EXPORT int nvJitLinkDestroy(struct link **h) {
	if (!h || !*h) {
		return NVJITLINK_ERROR_INTERNAL;
	}
	free((*h)->out);
	free((*h)->log);
	free(*h);
	*h = NULL;
	return NVJITLINK_SUCCESS;
}
