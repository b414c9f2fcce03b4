"""Peer: DeepGEMM's M-masked grouped FP8 x FP4 GEMM through its Python API.

This is the published B200 baseline's own path. DeepGEMM's FP8 x FP4 masked kernel is an
SM100 (Blackwell) kernel, so this peer runs only where `deep_gemm` is importable and the GPU
is SM100; anywhere else it raises a RuntimeError that says why, and the report shows it.
Self-contained: torch and deep_gemm only.
"""

import torch


def _unavailable_reason(device) -> str:
    try:
        import deep_gemm  # noqa: F401
    except ImportError as e:
        return f"deep_gemm is not importable here ({e})"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    major, minor = torch.cuda.get_device_capability(device)
    if major != 10:
        return (f"DeepGEMM's FP8 x FP4 masked kernel needs an SM100 GPU; this one is "
                f"sm_{major}{minor} ({torch.cuda.get_device_name(device)})")
    return ""


def run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c):
    why = _unavailable_reason(a_fp8.device)
    if why:
        raise RuntimeError(f"deepgemm_m_grouped_fp8_fp4_masked cannot run: {why}")
    import deep_gemm

    # Scales: A per token per 128 along K, B per row per 32 along K (float32 powers of two);
    # DeepGEMM converts float32 scale factors into its UE8M0 layout itself.
    deep_gemm.m_grouped_fp8_fp4_gemm_nt_masked(
        (a_fp8, a_scale), (b_fp4, b_scale), c, masked_m, int(expected_m),
        recipe_a=(1, 128), recipe_b=(1, 32))
    return c
