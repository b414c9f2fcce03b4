"""M-masked grouped FP8 x FP4 GEMM (definition grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048),
exact on bf16 or fp16 MMAs (kernel.py and one_pass.py say why and how; heuristics.py which
form a call takes).

Entry points:
- ``run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c)``: the definition's entry
  (g=4, n=2048, k=2048), destination passing: writes c and returns it.
- ``grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m=None,
  tile=None)``: any g >= 0, max_m >= 0, n >= 1 and k a positive multiple of 128.

Self-contained: only torch and triton, plus this folder's modules.
"""

from typing import NamedTuple

import torch

from .checks import check_grouped_inputs
from .fast_launch import INTERPRET, Launch
from .heuristics import DECODE_ROWS, DECODE_WARPS, Tile, choose
from .kernel import decode_b_kernel, gemm_bf16_kernel
from .one_pass import grouped_one_pass_kernel

DEF_G, DEF_N, DEF_K = 4, 2048, 2048


class _Plan(NamedTuple):
    empty: bool
    gemm: Launch = None     # the one pass, or the second pass
    decode: Launch = None   # the first pass (None: one pass)
    g: int = 0
    n: int = 0
    k: int = 0


_PLANS = {}


def _make_plan(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m, tile, entry):
    """Validates every argument (ValueError naming it) and chooses the tile and grid."""
    g, max_m, n, k = check_grouped_inputs(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m,
                                          (DEF_G, DEF_N, DEF_K) if entry else None)
    dev = a_fp8.device
    expected_m = None if expected_m is None else int(expected_m)
    if g == 0 or max_m == 0:
        return _Plan(True)
    tile = tile or choose(max_m, expected_m)
    if not isinstance(tile, Tile):
        raise ValueError(f"tile: expected a heuristics.Tile, got {type(tile).__name__}")
    grid = (-(-max_m // tile.BM) * -(-n // tile.BN), g, 1)
    if tile.one_pass:
        # Inline PTX needs an NVIDIA GPU; the interpreter decodes with integer ops instead.
        use_asm = dev.type == "cuda" and not INTERPRET and torch.version.hip is None
        consts = dict(K=k, BM=tile.BM, BN=tile.BN, SWAP=tile.SWAP, INTERPRETER=INTERPRET, USE_ASM=use_asm,
                      num_warps=tile.num_warps, num_stages=tile.num_stages)
        return _Plan(False, Launch(grouped_one_pass_kernel, grid, (max_m, n), consts, dev))
    consts = dict(K=k, BM=tile.BM, BN=tile.BN, GROUP_M=tile.GROUP_M, INTERPRETER=INTERPRET,
                  num_warps=tile.num_warps, num_stages=tile.num_stages)
    decode = Launch(decode_b_kernel, (-(-n // DECODE_ROWS), k // 128, g), (n,),
                    dict(K=k, BR=DECODE_ROWS, num_warps=DECODE_WARPS), dev)
    return _Plan(False, Launch(gemm_bf16_kernel, grid, (max_m, n), consts, dev), decode, g, n, k)


def grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m=None,
                                tile=None, _entry=False):
    """c[g, :rows] = (A_g * a_scale)[:rows] @ (E2M1(B_g) * b_scale)^T in bf16, c[g, rows:] = 0,
    rows = clamp(masked_m[g], 0, max_m).

    a_fp8 float8_e4m3fn [g, max_m, k]; a_scale float32 [g, max_m, k/128];
    b_fp4 int8/uint8 [g, n, k/2] (two E2M1 codes a byte, low nibble = even k);
    b_scale float32 [g, n, k/32]; masked_m int32/int64 [g] (read on the device, never synced);
    c bfloat16 [g, max_m, n] (written in full, may arrive uninitialised). All contiguous, on
    one device. expected_m (int or None) is a tile-choice hint only; ``tile`` overrides it.
    """
    try:
        key = (a_fp8.shape, a_scale.shape, b_fp4.shape, b_scale.shape, masked_m.shape, c.shape,
               a_fp8.dtype, a_scale.dtype, b_fp4.dtype, b_scale.dtype, masked_m.dtype, c.dtype,
               a_fp8.device, a_scale.device, b_fp4.device, b_scale.device, masked_m.device, c.device,
               a_fp8.is_contiguous() and a_scale.is_contiguous() and b_fp4.is_contiguous()
               and b_scale.is_contiguous() and masked_m.is_contiguous() and c.is_contiguous(),
               type(expected_m), expected_m, tile, _entry)  # 4.0 == 4: a float hint must not take 4's plan
        plan = _PLANS.get(key)
    except (AttributeError, TypeError):  # not tensors, or an unhashable hint: validate below
        key = plan = None
    if plan is None:
        plan = _make_plan(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m, tile, _entry)
        if key is not None:
            if len(_PLANS) > 1024:
                _PLANS.clear()
            _PLANS[key] = plan
    if plan.empty:
        return c
    if plan.decode is None:
        plan.gemm(a_fp8, a_scale, b_fp4, b_scale, masked_m, c)
    else:
        # Per call: the decoded weights are a function of this call's b_fp4 and b_scale, in
        # fresh buffers from the stream-ordered allocator (calls on other streams get others).
        bq = torch.empty((plan.g, plan.n, plan.k), dtype=torch.bfloat16, device=c.device)
        ref = torch.empty((plan.g, plan.n, plan.k // 128), dtype=torch.float32, device=c.device)
        plan.decode(b_fp4, b_scale, bq, ref)
        plan.gemm(a_fp8, a_scale, b_fp4, b_scale, bq, ref, masked_m, c)
    return c


def run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m, c):
    """Definition entry point (g=4, n=2048, k=2048); writes c and returns it."""
    if isinstance(expected_m, torch.Tensor):
        # A 0-d tensor hint would need a host read; only take it when it already lives on the host.
        expected_m = int(expected_m) if expected_m.device.type == "cpu" else None
    return grouped_gemm_fp8_fp4_masked(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, expected_m, _entry=True)
