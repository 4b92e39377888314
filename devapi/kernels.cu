// nccl4go's ready device-API kernels, compiled on first use against the
// NCCL device headers that match the loaded library (see kernels.go).
//
// The "fake-kernel" lines describe the kernels to the test fakes (fake NVRTC
// and CUDA driver); real compilers read them as comments.
// fake-kernel: nccl4go_lsa_allreduce_sum_f32
// fake-kernel: nccl4go_lsa_allgather_f32
// fake-kernel: nccl4go_devcomm_probe
#include <nccl_device.h>

// Sum all-reduce of count floats through load/store-accessible (LSA)
// memory: each rank's block b reads element i of every peer's send window
// and writes the sum to element i of every peer's receive window, for the
// elements this (rank, block) pair owns. One LSA barrier per block, so the
// grid may have at most the device communicator's lsaBarrierCount blocks.
// send and recv must not overlap.
extern "C" __global__ void nccl4go_lsa_allreduce_sum_f32(ncclWindow_t send, size_t sendOffset, ncclWindow_t recv,
							 size_t recvOffset, size_t count, ncclDevComm comm) {
	ncclLsaBarrierSession<ncclCoopCta> barrier{ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier, blockIdx.x};
	// Every rank's inputs are ready before anyone reads them.
	barrier.sync(ncclCoopCta(), cuda::memory_order_acquire);
	const int nranks = comm.lsaSize;
	const size_t first = threadIdx.x + (size_t)blockDim.x * (comm.lsaRank + (size_t)blockIdx.x * nranks);
	const size_t stride = (size_t)blockDim.x * gridDim.x * nranks;
	for (size_t i = first; i < count; i += stride) {
		float sum = 0.0f;
		for (int peer = 0; peer < nranks; peer++) {
			sum += ((const float *)ncclGetLsaPointer(send, sendOffset, peer))[i];
		}
		for (int peer = 0; peer < nranks; peer++) {
			((float *)ncclGetLsaPointer(recv, recvOffset, peer))[i] = sum;
		}
	}
	// Every rank's results are written before anyone goes on.
	barrier.sync(ncclCoopCta(), cuda::memory_order_release);
}

// All-gather of count floats per rank through LSA memory: each rank
// writes its send elements to elements [lsaRank*count, (lsaRank+1)*count)
// of every peer's receive window. The same barrier rules as the
// all-reduce; send and recv must not overlap.
extern "C" __global__ void nccl4go_lsa_allgather_f32(ncclWindow_t send, size_t sendOffset, ncclWindow_t recv,
						     size_t recvOffset, size_t count, ncclDevComm comm) {
	ncclLsaBarrierSession<ncclCoopCta> barrier{ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier, blockIdx.x};
	// Every rank is inside the kernel (its receive window free) before
	// anyone writes to it.
	barrier.sync(ncclCoopCta(), cuda::memory_order_acquire);
	const float *in = (const float *)ncclGetLsaPointer(send, sendOffset, comm.lsaRank);
	const size_t first = threadIdx.x + (size_t)blockDim.x * blockIdx.x;
	const size_t stride = (size_t)blockDim.x * gridDim.x;
	for (int peer = 0; peer < comm.lsaSize; peer++) {
		float *out = (float *)ncclGetLsaPointer(recv, recvOffset, peer) + (size_t)comm.lsaRank * count;
		for (size_t i = first; i < count; i += stride) {
			out[i] = in[i];
		}
	}
	// Every rank's writes are done before anyone goes on.
	barrier.sync(ncclCoopCta(), cuda::memory_order_release);
}

// What a kernel sees of its device communicator and window: out[0] rank,
// out[1] nRanks, out[2] lsaRank, out[3] lsaSize, out[4] the LSA pointer to
// this rank's own part of win at offset, out[5] 1 once an LSA barrier of
// all LSA ranks completed, out[6] the float at that pointer (read through
// it).
extern "C" __global__ void nccl4go_devcomm_probe(ncclWindow_t win, size_t offset, unsigned long long *out,
						 ncclDevComm comm) {
	ncclLsaBarrierSession<ncclCoopCta> barrier{ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier, blockIdx.x};
	barrier.sync(ncclCoopCta(), cuda::memory_order_acquire);
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		float *mine = (float *)ncclGetLsaPointer(win, offset, comm.lsaRank);
		out[0] = comm.rank;
		out[1] = comm.nRanks;
		out[2] = comm.lsaRank;
		out[3] = comm.lsaSize;
		out[4] = (unsigned long long)mine;
		out[6] = __float_as_uint(*mine);
	}
	barrier.sync(ncclCoopCta(), cuda::memory_order_release);
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		out[5] = 1;
	}
}
