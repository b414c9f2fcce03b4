"""Public library functions: the project's kernels, callable without the harness.

Each allocates the output where none is given and calls the generic launcher of a leaderboard
solution, so the library and the entries can never drift apart. ``kernel="auto"`` takes the
exact one that is faster as a caller sees it: on Hopper (compute capability 9.0) the CUDA
solution where it takes the tensors (built with nvcc for sm_90a on first use; without a CUDA
toolkit the Triton one, with a warning), elsewhere the Triton one, which runs on any GPU Triton
supports and on the CPU under the interpreter. The figures behind the choice are the harness
means in docs/results.md (H200, host time included: the CUDA solutions take less at every
workload of both definitions but one, sparse m 16, where the two means are 0.4 µs apart).
"""

from __future__ import annotations

import functools
import os
import warnings

import torch

from .solutions import load_solution

GROUPED_DEFINITION = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
# "triton_fp4_dot_scaled": the B200 entry (tl.dot_scaled on Blackwell's block-scaled MMA; not
# run on a B200, emulated by Triton elsewhere): docs/kernels/grouped_gemm_b200.md
GROUPED_KERNELS = ("cuda_fp4_wgmma", "triton_fp4_exact_mma", "triton_fp4_dot_scaled")
SPARSE_DEFINITION = "sparse_gemm_fp4_fp8_n2048_k2048"
SPARSE_KERNELS = ("cuda_sparse_fp4_mma", "triton_sparse_fp4_exact")


@functools.cache
def _capability(index: int) -> tuple:
    return torch.cuda.get_device_capability(index)  # a device query, asked once a device


def _on_hopper(t: torch.Tensor) -> bool:
    return t.is_cuda and torch.version.hip is None and _capability(t.get_device()) == (9, 0)


@functools.cache
def _cuda_toolkit() -> bool:
    """Whether torch's cpp_extension, which builds the CUDA solutions on their first call, finds
    a CUDA toolkit (nvcc). Without one 'auto' takes the Triton solutions, and says so once."""
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None:
        warnings.warn("lowbit_gemm: no CUDA toolkit (nvcc) found to build the CUDA kernels on this Hopper GPU; "
                      "kernel='auto' takes the Triton ones", RuntimeWarning, stacklevel=6)  # the caller's line
    return CUDA_HOME is not None


def _cuda_fits(t: torch.Tensor, *tensors: torch.Tensor) -> bool:
    """'auto' takes the CUDA solution: on Hopper, with a toolkit to build it, every tensor aligned."""
    return _on_hopper(t) and _cuda_toolkit() and _aligned(*tensors)


def _aligned(*tensors: torch.Tensor) -> bool:
    return all(t.data_ptr() % 16 == 0 for t in tensors)  # the CUDA kernels move 16-byte vectors


def _dims(name: str, t, dims: int, layout: str) -> None:
    """The checks the output's allocation and the kernel's choice need before the solution's
    own checks run."""
    if not isinstance(t, torch.Tensor) or t.dim() != dims:
        got = f"shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"{name}: expected a {dims}-D tensor {layout}, got {got}")


def _named_out(call):
    """Runs call(); the solutions name the output `c`, the caller passed it as `out`."""
    try:
        return call()
    except ValueError as e:
        if str(e).startswith("c: "):
            raise ValueError("out: " + str(e)[3:]) from None
        raise


@functools.cache
def _solution(definition: str, kernel: str):
    """The solution's main module, imported once a process: load_solution looks for its folder
    on disk, ~17 µs a call on a CPU, which a library call must not pay each time."""
    return load_solution(definition, "lowbit", kernel)


def _kernel(definition: str, kernel: str, kernels: tuple, cuda_fits, name: str, t: torch.Tensor) -> object:
    """The named solution, or for "auto" kernels[0] (CUDA) where cuda_fits() holds, else
    kernels[1]; cuda_fits runs only for "auto" (it reads the device's capability). A Triton
    solution off the GPU needs the interpreter: `name` names the tensor t in the error."""
    if kernel == "auto":
        kernel = kernels[0 if cuda_fits() else 1]
    elif kernel not in kernels:
        raise ValueError(f"kernel: expected 'auto' or one of {kernels}, got {kernel!r}")
    if kernel.startswith("triton") and not t.is_cuda and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise ValueError(f"{name}: a {t.device.type} tensor; the Triton kernels run off the GPU only under the "
                         "Triton interpreter (TRITON_INTERPRET=1 set before triton is imported)")
    return _solution(definition, kernel)


def grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m=None,
                                out: torch.Tensor | None = None, kernel: str = "auto") -> torch.Tensor:
    """c[g, max_m, n] (bf16): per group, A_g[:masked_m[g]] @ B_g.T, other rows zero.

    Sizes are read from the tensors (k a multiple of 128); see the definition for the formats.
    kernel: "auto", or one of GROUPED_KERNELS by name. "auto" takes cuda_fp4_wgmma on Hopper
    where n is a multiple of 128 and every tensor but masked_m is 16-byte aligned, else
    triton_fp4_exact_mma.
    """
    _dims("a_fp8", a_fp8, 3, "[g, max_m, k]")
    _dims("b_fp4", b_fp4, 3, "[g, n, k/2]")
    if out is None:
        g, max_m, _ = a_fp8.shape
        out = torch.empty(g, max_m, b_fp4.shape[1], dtype=torch.bfloat16, device=a_fp8.device)
    solution = _kernel(GROUPED_DEFINITION, kernel, GROUPED_KERNELS,
                       lambda: b_fp4.shape[1] % 128 == 0 and _cuda_fits(a_fp8, a_fp8, a_scale, b_fp4, b_scale, out),
                       "a_fp8", a_fp8)
    _named_out(lambda: solution.grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, out,
                                                            expected_m=expected_m))
    return out


def sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, out: torch.Tensor | None = None, kernel: str = "auto") -> torch.Tensor:
    """c[m, n] (bf16) = dense(A) @ B.T with A in the 2:4 FP4 encoding and B in FP8 e4m3.

    Sizes are read from the tensors (k a multiple of 128). kernel: "auto", or one of
    SPARSE_KERNELS by name. "auto" takes cuda_sparse_fp4_mma on Hopper where every tensor is
    16-byte aligned, else triton_sparse_fp4_exact.
    """
    _dims("a_vals", a_vals, 2, "[m, k/4]")
    _dims("b_fp8", b_fp8, 2, "[n, k]")
    if out is None:
        out = torch.empty(a_vals.shape[0], b_fp8.shape[0], dtype=torch.bfloat16, device=b_fp8.device)
    solution = _kernel(SPARSE_DEFINITION, kernel, SPARSE_KERNELS,
                       lambda: _cuda_fits(b_fp8, a_vals, a_meta, b_fp8, out), "b_fp8", b_fp8)
    _named_out(lambda: solution.sparse_gemm_fp4_fp8(a_vals, a_meta, b_fp8, out))
    return out
