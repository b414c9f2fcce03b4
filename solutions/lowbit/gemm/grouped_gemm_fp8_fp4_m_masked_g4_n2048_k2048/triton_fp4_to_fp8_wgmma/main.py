"""M-masked grouped FP8 x FP4 GEMM (definition grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048).

Entry points:
- ``run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c)``: the definition's entry
  (g=4, n=2048, k=2048), destination passing: writes c and returns it.
- ``grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m=None)``:
  the generic launcher for any g >= 0, max_m >= 0, n >= 1 and k a positive multiple of 128.

Self-contained: only torch and triton, plus this folder's modules.
"""

import os

import torch

from .heuristics import ZN, ZR, Config, choose_config, grid_split
from .kernel import grouped_gemm_kernel

DEF_G, DEF_N, DEF_K = 4, 2048, 2048
# The interpreter's fp32->bf16 cast truncates; the kernel rounds by hand there.
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


_CAPABILITY = {}


def _capability(dev):
    """Compute capability per device, looked up once (a device property, not data)."""
    if dev.type != "cuda":
        return (9, 0)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if index not in _CAPABILITY:
        _CAPABILITY[index] = torch.cuda.get_device_capability(index)
    return _CAPABILITY[index]


def _check(name, t, dtypes, shape, device):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name}: expected dtype {' or '.join(map(str, dtypes))}, got {t.dtype}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name}: expected device {device}, got {t.device}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor")


def grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m=None,
                                config: Config = None):
    """c[g, :rows] = (A_g * a_scale)[:rows] @ (E2M1(B_g) * b_scale)^T in bf16, c[g, rows:] = 0,
    rows = clamp(masked_m[g], 0, max_m).

    a_fp8 float8_e4m3fn [g, max_m, k]; a_scale float32 [g, max_m, k/128];
    b_fp4 int8/uint8 [g, n, k/2] (two E2M1 codes a byte, low nibble = even k);
    b_scale float32 [g, n, k/32]; masked_m int32/int64 [g] (read on the device, never synced);
    c bfloat16 [g, max_m, n] (written in full, may arrive uninitialised).
    Requirements: k a positive multiple of 128; n >= 1 (any n: edges are masked); all tensors
    contiguous and on one device. expected_m (int or None) is a tile-choice hint only.
    ``config`` overrides the heuristic tile choice (tests and tuning).
    """
    if not isinstance(a_fp8, torch.Tensor) or a_fp8.dim() != 3:
        raise ValueError("a_fp8: expected a 3-D tensor [g, max_m, k]")
    if not isinstance(b_fp4, torch.Tensor) or b_fp4.dim() != 3:
        raise ValueError("b_fp4: expected a 3-D tensor [g, n, k/2]")
    g, max_m, k = a_fp8.shape
    n = b_fp4.shape[1]
    if k <= 0 or k % 128:
        raise ValueError(f"a_fp8: k (last dimension) must be a positive multiple of 128, got {k}")
    if n < 1:
        raise ValueError(f"b_fp4: n (dimension 1) must be >= 1, got {n}")
    dev = a_fp8.device
    _check("a_fp8", a_fp8, (torch.float8_e4m3fn,), (g, max_m, k), dev)
    _check("a_scale", a_scale, (torch.float32,), (g, max_m, k // 128), dev)
    _check("b_fp4", b_fp4, (torch.int8, torch.uint8), (g, n, k // 2), dev)
    _check("b_scale", b_scale, (torch.float32,), (g, n, k // 32), dev)
    _check("masked_m", masked_m, (torch.int32, torch.int64), (g,), dev)
    _check("c", c, (torch.bfloat16,), (g, max_m, n), dev)
    if expected_m is not None and not isinstance(expected_m, int):
        try:
            expected_m = int(expected_m)
        except (TypeError, ValueError):
            raise ValueError(f"expected_m: expected an int or None, got {type(expected_m).__name__}")
    if g == 0 or max_m == 0:
        return c
    if config is None:
        config = choose_config(max_m, expected_m, n, _capability(dev))
    if config.BN < 32 or config.BM < 16:
        # BN=16 gave wrong results on an H200 in the scale-fallback path (run 3); not chosen.
        raise ValueError(f"config: tiles below BN=32 / BM=16 are not supported, got {config}")
    kwargs = config.as_kwargs()
    # Inline PTX needs an NVIDIA GPU; the interpreter and other backends take the Triton path.
    kwargs["USE_ASM"] = bool(kwargs["USE_ASM"]) and not _INTERPRET and dev.type == "cuda" \
        and torch.version.hip is None
    m_split = grid_split(config, max_m, expected_m, n, g)
    # Plain integer ceil-division: triton.cdiv is a constexpr function, slow to call from Python,
    # and the harness times this host path too.
    grid = (-(-n // config.BN) * m_split + -(-max_m // ZR), g)
    grouped_gemm_kernel[grid](a_fp8, a_scale, b_fp4, b_scale, masked_m, c, max_m, n, k, m_split,
                              ZR=ZR, ZN=ZN, MANUAL_RNE=_INTERPRET, **kwargs)
    return c


def run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c):
    """Definition entry point (g=4, n=2048, k=2048); writes c and returns it."""
    if a_fp8.dim() != 3 or a_fp8.shape[0] != DEF_G or a_fp8.shape[2] != DEF_K:
        raise ValueError(f"a_fp8: expected shape [{DEF_G}, max_m, {DEF_K}], got {tuple(a_fp8.shape)}")
    if b_fp4.dim() != 3 or tuple(b_fp4.shape) != (DEF_G, DEF_N, DEF_K // 2):
        raise ValueError(f"b_fp4: expected shape ({DEF_G}, {DEF_N}, {DEF_K // 2}), got {tuple(b_fp4.shape)}")
    if isinstance(expected_m, torch.Tensor):
        # A 0-d tensor hint would need a host read; only take it when it already lives on the host.
        expected_m = int(expected_m) if expected_m.device.type == "cpu" else None
    return grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m)
