// saxpy for TestGPULaunchCUBIN: nvcc -cubin -arch=sm_90 -o saxpy.cubin saxpy.cu
extern "C" __global__ void saxpy(float a, const float *x, float *y, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		y[i] = a * x[i] + y[i];
	}
}
