// collconfig_probe: drives the fake NCCL's nccl*Config collectives from C,
// for faketest's TestFakeCollConfig, with structs the binding never sends.
// It opens the fake CUDA driver and NCCL named by NCCL4GO_CUDA_LIBRARY and
// NCCL_LIBRARY, creates a one-rank communicator on device 0 and, for each
// argument, calls ncclAllReduceConfig with count 0 and prints the result:
//   null                     a NULL config
//   SIZE:VERSION:MAGIC       a config of SIZE bytes (zeros, then
//                            NCCL_COLLCONFIG_INITIALIZER's values where
//                            they fit) declaring VERSION, with MAGIC (hex)
//   count                    a valid config with count 1 and NULL buffers
//   syms                     which of the eight entry points exist (0/1)
//   config:SIZE:VERSION:LOI:SIG  ncclCommInitRankConfig with an ncclConfig_t
//                            of SIZE bytes declaring VERSION, with
//                            launchOrderImplicit LOI and numRmaSig SIG
//   nvls:SIZE:VERSION:MODE   the same with nvlsHostMode (at 112, 2.32.3)
//                            MODE and the 2.31 fields unset
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	char internal[128];
} unique_id; // ncclUniqueId, passed by value

typedef int (*allreduce_cfg_fn)(const void *, void *, size_t, int, int, void *, void *, const void *);

static void *must(void *h, const char *name) {
	void *p = dlsym(h, name);
	if (!p) {
		fprintf(stderr, "no %s\n", name);
		exit(2);
	}
	return p;
}

int main(int argc, char **argv) {
	void *cu = dlopen(getenv("NCCL4GO_CUDA_LIBRARY"), RTLD_NOW | RTLD_GLOBAL);
	void *nccl = cu ? dlopen(getenv("NCCL_LIBRARY"), RTLD_NOW) : NULL;
	if (!nccl) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 2;
	}
	static const char *const names[] = {"ncclAllReduceConfig", "ncclBroadcastConfig", "ncclReduceConfig",
					    "ncclAllGatherConfig", "ncclReduceScatterConfig", "ncclAlltoAllConfig",
					    "ncclGatherConfig", "ncclScatterConfig"};
	if (argc > 1 && strcmp(argv[1], "syms") == 0) {
		for (int i = 0; i < 8; i++) {
			printf("%d", dlsym(nccl, names[i]) != NULL);
		}
		printf("\n");
		return 0;
	}
	int (*cuInit)(unsigned) = must(cu, "cuInit");
	int (*retain)(void **, int) = must(cu, "cuDevicePrimaryCtxRetain");
	int (*setcur)(void *) = must(cu, "cuCtxSetCurrent");
	int (*uid)(void *) = must(nccl, "ncclGetUniqueId");
	int (*init)(void **, int, unique_id, int) = must(nccl, "ncclCommInitRank");
	allreduce_cfg_fn ar = (allreduce_cfg_fn)dlsym(nccl, "ncclAllReduceConfig"); // 2.31
	void *ctx = NULL, *comm = NULL;
	unique_id id;
	int r[5] = {cuInit(0), retain(&ctx, 0), setcur(ctx), uid(&id), 0};
	if (!r[0] && !r[1] && !r[2] && !r[3]) {
		r[4] = init(&comm, 1, id, 0);
	}
	if (r[0] || r[1] || r[2] || r[3] || r[4]) {
		const char *(*last)(void *) = must(nccl, "ncclGetLastError");
		fprintf(stderr, "setup failed: %d %d %d %d %d: %s\n", r[0], r[1], r[2], r[3], r[4], last(NULL));
		return 2;
	}
	int (*init_cfg)(void **, int, unique_id, int, void *) = must(nccl, "ncclCommInitRankConfig");
	for (int i = 1; i < argc; i++) {
		unsigned csize, cversion;
		int loi, sig;
		int nvls = INT_MIN;
		loi = sig = INT_MIN;
		if (sscanf(argv[i], "config:%u:%u:%d:%d", &csize, &cversion, &loi, &sig) == 4 ||
		    sscanf(argv[i], "nvls:%u:%u:%d", &csize, &cversion, &nvls) == 3) {
			// ncclConfig_t: NCCL_CONFIG_INITIALIZER (every int INT_MIN,
			// pointers NULL) then launchOrderImplicit (96), numRmaSig
			// (100) and nvlsHostMode (112).
			int32_t c[30];
			for (int k = 0; k < 30; k++) {
				c[k] = INT_MIN;
			}
			uint64_t sz = csize;
			unsigned m = 0xcafebeef;
			memcpy(c, &sz, 8);
			memcpy(c + 2, &m, 4);
			memcpy(c + 3, &cversion, 4);
			memset(c + 8, 0, 8);   // netName
			memset(c + 12, 0, 8);  // commName
			c[24] = loi;
			c[25] = sig;
			c[28] = nvls; // nvlsHostMode (2.32.3)
			void *cm = NULL;
			unique_id cid;
			int r = uid(&cid);
			if (!r) {
				r = init_cfg(&cm, 1, cid, 0, c);
			}
			printf("%s%d", i > 1 ? " " : "", r);
			continue;
		}
		if (!ar) {
			fprintf(stderr, "no ncclAllReduceConfig\n");
			return 2;
		}
		uint64_t cfg[16];
		memset(cfg, 0, sizeof cfg);
		const void *p = cfg;
		size_t count = 0;
		size_t size = 72;
		unsigned version = 23203, magic = 0xcafebeef;
		if (strcmp(argv[i], "null") == 0) {
			p = NULL;
		} else if (strcmp(argv[i], "count") != 0) {
			if (sscanf(argv[i], "%zu:%u:%x", &size, &version, &magic) != 3) {
				fprintf(stderr, "bad case %s\n", argv[i]);
				return 2;
			}
		} else {
			count = 1;
		}
		unsigned char *b = (unsigned char *)cfg;
		int undef = INT_MIN, one = 1;
		memcpy(b, &size, 8);
		memcpy(b + 8, &magic, 4);
		memcpy(b + 12, &version, 4);
		for (int off = 24; off < 40; off += 4) {
			memcpy(b + off, &undef, 4); // minCTAs, maxCTAs, nvlsCTAs, cgaClusterSize
		}
		memcpy(b + 48, &one, 4);    // forceAlgSelection
		memcpy(b + 52, &undef, 4);  // CTAPolicy
		printf("%s%d", i > 1 ? " " : "", ar(NULL, NULL, count, 7, 0, comm, NULL, p));
	}
	printf("\n");
	return 0;
}
