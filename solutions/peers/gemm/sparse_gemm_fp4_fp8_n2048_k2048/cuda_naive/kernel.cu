// Peer: a naive CUDA kernel for the 2:4 sparse FP4 x FP8 GEMM, in the spirit of the published
// cuda_sparse_fp4_fp8_naive baseline: one thread per output element, A's FP4 codes and B's
// FP8 bytes decoded on the fly, fp32 accumulation, no shared memory, no tensor cores.
// It is here so that the naive-to-fast ratio measured on this GPU can stand beside the
// published B200 naive figure (never divided by it). Built by FlashInfer-Bench's torch builder
// (torch.utils.cpp_extension); the entry point is run(a_vals, a_meta, b_fp8, c).
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_bf16.h>
#include <cstdint>

// E2M1: bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa; exponent 0 is subnormal.
__device__ __forceinline__ float e2m1_value(uint32_t code) {
    const uint32_t e = (code >> 1) & 3u, man = code & 1u;
    const float mag = e == 0 ? 0.5f * man : ldexpf(1.0f + 0.5f * man, (int)e - 1);
    return (code & 8u) ? -mag : mag;
}

// FP8 e4m3fn: bit 7 sign, bits 6..3 exponent (bias 7), bits 2..0 mantissa; 0x7f/0xff NaN.
__device__ __forceinline__ float e4m3_value(uint8_t bits) {
    const uint32_t e = (bits >> 3) & 15u, man = bits & 7u;
    float mag;
    if (e == 15u && man == 7u) mag = __int_as_float(0x7fc00000);
    else if (e == 0u) mag = ldexpf((float)man, -9);  // subnormal: man/8 * 2^-6
    else mag = ldexpf(1.0f + man * 0.125f, (int)e - 7);
    return (bits & 0x80u) ? -mag : mag;
}

__global__ void sparse_fp4_fp8_naive_kernel(const uint8_t* __restrict__ a_vals,
                                            const uint8_t* __restrict__ a_meta,
                                            const uint8_t* __restrict__ b,
                                            __nv_bfloat16* __restrict__ c,
                                            int m, int n, int groups) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y;
    if (col >= n || row >= m) return;
    const uint8_t* av = a_vals + (size_t)row * groups;
    const uint8_t* am = a_meta + (size_t)row * groups;
    const uint8_t* bn = b + (size_t)col * groups * 4;  // row `col` of B [n, k]
    float acc = 0.0f;
    for (int j = 0; j < groups; ++j) {
        const uint32_t v = av[j], meta = am[j];
        // Two kept values per group of 4 columns; a repeated position simply adds twice.
        acc += e2m1_value(v & 15u) * e4m3_value(bn[4 * j + (meta & 3u)]);
        acc += e2m1_value(v >> 4) * e4m3_value(bn[4 * j + ((meta >> 2) & 3u)]);
    }
    c[(size_t)row * n + col] = __float2bfloat16(acc);
}

void run(torch::Tensor a_vals, torch::Tensor a_meta, torch::Tensor b_fp8, torch::Tensor c) {
    TORCH_CHECK(a_vals.is_cuda() && a_meta.is_cuda() && b_fp8.is_cuda() && c.is_cuda(),
                "cuda_naive: all tensors must be on a CUDA device");
    TORCH_CHECK(a_vals.dim() == 2 && a_meta.sizes() == a_vals.sizes(),
                "cuda_naive: a_vals and a_meta must both be [m, k/4]");
    TORCH_CHECK(a_vals.element_size() == 1 && a_meta.element_size() == 1 &&
                b_fp8.element_size() == 1, "cuda_naive: a_vals, a_meta, b_fp8 must be 1-byte types");
    TORCH_CHECK(b_fp8.dim() == 2 && b_fp8.size(1) == 4 * a_vals.size(1),
                "cuda_naive: b_fp8 must be [n, k] with k = 4 * a_vals.size(1)");
    TORCH_CHECK(c.scalar_type() == at::kBFloat16 && c.size(0) == a_vals.size(0) &&
                c.size(1) == b_fp8.size(0), "cuda_naive: c must be bf16 [m, n]");
    TORCH_CHECK(a_vals.is_contiguous() && a_meta.is_contiguous() && b_fp8.is_contiguous() &&
                c.is_contiguous(), "cuda_naive: all tensors must be contiguous");
    const int m = (int)a_vals.size(0), groups = (int)a_vals.size(1), n = (int)b_fp8.size(0);
    if (m == 0 || n == 0) return;
    const dim3 block(256), grid((n + 255) / 256, m);
    sparse_fp4_fp8_naive_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        static_cast<const uint8_t*>(a_vals.data_ptr()), static_cast<const uint8_t*>(a_meta.data_ptr()),
        static_cast<const uint8_t*>(b_fp8.data_ptr()),
        reinterpret_cast<__nv_bfloat16*>(c.data_ptr()), m, n, groups);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("run", &run, "2:4 sparse FP4 x FP8 GEMM, naive (one thread per output element)");
}
