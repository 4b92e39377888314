// nccl4go C shim: the per-collective config. See collconfig.h.
#include "collconfig.h"
#include "group.h"

#include <stdlib.h>
#include <string.h>

static capi_status coll_invalid(const char *why) {
	capi_status s = {4, strdup(why)}; // ncclInvalidArgument
	return s;
}

capi_status capi_coll_config(int which, uintptr_t send, uintptr_t recv, size_t count, int datatype, int op, int root,
			     uintptr_t comm, uintptr_t stream, const capi_coll_in *in, const capi_ext_in *ext,
			     const char *strs, size_t nstrs) {
	static const int syms[CAPI_COLL_COUNT] = {
		CAPI_SYM_ncclAllReduceConfig,     CAPI_SYM_ncclBroadcastConfig, CAPI_SYM_ncclReduceConfig,
		CAPI_SYM_ncclAllGatherConfig,     CAPI_SYM_ncclReduceScatterConfig,
		CAPI_SYM_ncclAlltoAllConfig,      CAPI_SYM_ncclGatherConfig,    CAPI_SYM_ncclScatterConfig,
	};
	if (which < 0 || which >= CAPI_COLL_COUNT || !in) {
		return coll_invalid("nccl4go shim: capi_coll_config: bad collective or no config");
	}
	void *fn = capi_nccl_fn(syms[which]);
	if (!fn) {
		capi_status s = {capi_nccl_missing(), NULL};
		return s;
	}
	if (in->size < 40 || in->size > sizeof(capi_coll_config_v23203) || in->next < 0 || in->next > CAPI_EXT_MAX ||
	    nstrs > CAPI_COLL_STR_MAX || (in->next > 0 && !ext) || (nstrs > 0 && !strs)) {
		return coll_invalid("nccl4go shim: capi_coll_config: config out of bounds");
	}
	// The config, its strings (each NUL-terminated) and its ext list: on
	// this stack; inside a group, in one heap block the group keeps until
	// its outermost end. NCCL copies the struct but not what its pointers
	// reach (STyGIANet/nccl 2.31.0a16's ncclParseCollConfig), and a group's
	// work is planned at the group's end: the strings and the ext list
	// must outlive the call there.
	int nstr = in->next + 1;
	size_t text_n = nstrs + (size_t)nstr, nodes_n = in->next > 0 ? (size_t)in->next : 1;
	int kept = group_open_here();
	char stack_text[kept ? 1 : text_n];
	capi_config_ext stack_nodes[kept ? 1 : nodes_n];
	capi_coll_config_v23203 stack_cfg;
	char *text = stack_text;
	capi_config_ext *nodes = stack_nodes;
	capi_coll_config_v23203 *cfg = &stack_cfg;
	void *block = NULL;
	if (kept) {
		block = malloc(sizeof *cfg + nodes_n * sizeof *nodes + text_n);
		if (!block) {
			return coll_invalid("nccl4go shim: capi_coll_config: out of memory");
		}
		cfg = block;
		nodes = (capi_config_ext *)(cfg + 1);
		text = (char *)(nodes + nodes_n);
	}
#define COLL_FAIL(why)                        \
	do {                                  \
		free(block);                  \
		return coll_invalid(why);     \
	} while (0)
	size_t used = 0;
#define COLL_STR(off, len, out)                                                                \
	do {                                                                                   \
		if ((off) < 0 || (len) < 0 || (size_t)(off) + (size_t)(len) > nstrs) {         \
			COLL_FAIL("nccl4go shim: capi_coll_config: string out of bounds");   \
		}                                                                              \
		memcpy(text + used, strs + (off), (size_t)(len));                              \
		text[used + (size_t)(len)] = 0;                                                \
		(out) = text + used;                                                           \
		used += (size_t)(len) + 1;                                                     \
	} while (0)
	memset(cfg, 0, sizeof *cfg);
	cfg->size = in->size;
	cfg->magic = 0xcafebeef;
	cfg->version = in->version;
	cfg->minCTAs = in->minCTAs;
	cfg->maxCTAs = in->maxCTAs;
	cfg->nvlsCTAs = in->nvlsCTAs;
	cfg->cgaClusterSize = in->cgaClusterSize;
	if (in->alg_len >= 0) {
		COLL_STR(in->alg_off, in->alg_len, cfg->algSelection);
	}
	cfg->forceAlgSelection = in->forceAlgSelection;
	cfg->CTAPolicy = in->CTAPolicy;
	cfg->userProfilerTag = in->userProfilerTag;
	cfg->launchCompletionEvent = in->launchCompletionEvent;
	for (int i = 0; i < in->next; i++) {
		capi_config_ext *n = &nodes[i];
		memset(n, 0, sizeof *n);
		n->next = i + 1 < in->next ? &nodes[i + 1] : NULL;
		n->vendorId = ext[i].vendorId;
		n->optionId = ext[i].optionId;
		switch (ext[i].kind) {
		case CAPI_EXT_INT:
			n->val.intVal = ext[i].int_val;
			break;
		case CAPI_EXT_STR:
			COLL_STR(ext[i].str_off, ext[i].str_len, n->val.strVal);
			break;
		case CAPI_EXT_PTR:
			n->val.ptrVal = (void *)ext[i].ptr_val;
			break;
		default:
			COLL_FAIL("nccl4go shim: capi_coll_config: bad ext kind");
		}
	}
#undef COLL_STR
#undef COLL_FAIL
	cfg->ext = in->next > 0 ? &nodes[0] : NULL;
	// Fields past the size sent stay zero: NCCL reads only size bytes.
	int g = capi_gate_queue(comm);
	if (g) {
		free(block);
		capi_status s = {g, NULL};
		return s;
	}
	const void *sb = (const void *)send;
	void *rb = (void *)recv, *c = (void *)comm, *st = (void *)stream;
	int r;
	switch (which) {
	case CAPI_COLL_REDUCE:
		r = ((int (*)(const void *, void *, size_t, int, int, int, void *, void *, const void *))fn)(
			sb, rb, count, datatype, op, root, c, st, cfg);
		break;
	case CAPI_COLL_ALLGATHER:
	case CAPI_COLL_ALLTOALL:
		r = ((int (*)(const void *, void *, size_t, int, void *, void *, const void *))fn)(sb, rb, count,
												     datatype, c, st, cfg);
		break;
	default: { // one int after the datatype: the root, or the reduction
		int arg = which == CAPI_COLL_BROADCAST || which == CAPI_COLL_GATHER || which == CAPI_COLL_SCATTER ? root : op;
		r = ((int (*)(const void *, void *, size_t, int, int, void *, void *, const void *))fn)(
			sb, rb, count, datatype, arg, c, st, cfg);
		break;
	}
	}
	if (block) {
		group_keep(block); // freed at the outermost group end
	}
	return capi_nccl_status(r);
}
