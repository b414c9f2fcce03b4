"""CPU model of the CUDA grouped GEMM's register-weights form (cuda_fp4_wgmma/grouped_regw.cuh and
prepare_kernel<true> in grouped_prepared.cuh).

Inside each 128-K block the form multiplies K in the order of the weights' register fragments:
step s, fragment column c stands for K = 32 t + 4 s + q (t = (c % 8) / 2, q = c % 2 + 2 (c / 8)).
The first pass writes the tokens' fp16 image in that order, and the rescale factors of each token
row; the consumers decode each thread's 16 bytes of codes into the fragments. This ports the
pass's stores, the descriptor's reads, the fragments' assembly and the rescale, and checks that
both operands meet at the same K and that whole calls give the definition's sum.
"""

import re
from pathlib import Path

import torch

from lowbit_gemm.numerics import e2m1_decode, unpack_fp4
from lowbit_gemm.oracle import grouped_gemm_oracle
from ptx_model import sw128_offset
from test_grouped_prepared_model import FORM_CASES, clamp_rows, small_inputs
from test_grouped_prepared_model import HDR as PREP  # grouped_prepared.cuh

HDR = (Path(__file__).resolve().parents[1] / "solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
       / "cuda_fp4_wgmma/grouped_regw.cuh").read_text()
TT, TW = (int(x) for x in re.search(r"constexpr int TT = (\d+), TW = (\d+);", HDR).groups())
assert (TT, TW) == (256, 128)


def k_of(s, c):
    """regw::k_of."""
    return 32 * ((c % 8) // 2) + 4 * s + c % 2 + 2 * (c // 8)


def pass_store(r, qq, p):
    """prepare_kernel<true>: thread (row r, quarter qq)'s byte pair p (K 32 qq + 2 p, + 1 of the
    block) goes to stage p / 8 at r * 128 + (((p % 8) ^ (r % 8)) << 4) + 4 qq: (stage, byte offset)."""
    return p // 8, r * 128 + (((p % 8) ^ (r & 7)) << 4) + qq * 4


def test_token_image_holds_each_step_and_column_at_its_k():
    """What the descriptor reads at (row, step 4 st + j, column c) of stage st is K k_of(s, c)."""
    rows = 128
    held = {}
    for r in range(rows):
        for qq in range(4):
            for p in range(16):
                st, off = pass_store(r, qq, p)
                for v in range(2):
                    held[(st, off + 2 * v)] = (r, 32 * qq + 2 * p + v)
    assert len(held) == 2 * rows * 64  # a bijection onto both stages
    for st in range(2):
        for r in range(rows):
            for kk in range(64):
                s, c = 4 * st + kk // 16, kk % 16
                assert held[(st, sw128_offset(r, kk, rows))] == (r, k_of(s, c))


def test_weight_fragments_hold_each_step_and_column_at_its_k():
    """decode_block: word i of thread t's 16 bytes, f16x2 b of its decode (K 32 t + 8 i + 2 b, + 1)
    -> frag[2 i + b / 2], register 2 (b % 2) (+ 1 for the row + 8): columns 2 t + 8 (b % 2) + v."""
    for t in range(4):
        for i in range(4):
            for b in range(4):
                s = 2 * i + b // 2
                for v in range(2):
                    col = 2 * t + 8 * (b % 2) + v
                    assert k_of(s, col) == 32 * t + 8 * i + 2 * b + v


def factor_slot(c):
    """prepared::regw_factor_slot: where token row c (0..127) of an image tile keeps its factor."""
    return 16 * (c // 16) + 4 * (c % 8 // 2) + 2 * (c // 8 % 2) + c % 2


def test_factor_slot_is_the_headers():
    body = re.search(r"int regw_factor_slot\(int c\) \{ return ([^;]+);", PREP).group(1)
    assert all(eval(body.replace("/", "//"), {"c": c}) == factor_slot(c) for c in range(128))


def test_each_thread_loads_the_factors_of_its_accumulators():
    """The rescale's load i of thread t (lane % 4) reads the 16 bytes at 16 i + 4 t of the block's
    factors (the two image tiles' 128 each, in order); its floats x, y, z, w multiply acc 8 i + 0 and
    2, 1 and 3, 4 and 6, 5 and 7, which hold token columns 8 g + 2 t + (a % 2) for acc 4 g + a."""
    stored = {}
    for tile in range(TT // 128):
        for c in range(128):
            stored[128 * tile + factor_slot(c)] = 128 * tile + c
    assert sorted(stored) == list(range(TT))  # a bijection
    for t in range(4):
        for i in range(TT // 16):
            for q in range(4):
                col = stored[16 * i + 4 * t + q]
                for acc in (8 * i + 4 * (q // 2) + q % 2, 8 * i + 4 * (q // 2) + q % 2 + 2):
                    g, a = divmod(acc, 4)
                    assert col == 8 * g + 2 * t + a % 2


def rescale_factors(a_scale, rows):
    """prepare_kernel<true>'s ratio: e_kb / e_kb+1, the last block e_last; 1 past masked_m."""
    g, max_m, kb_count = a_scale.shape
    r = torch.ones(g, max_m, kb_count)
    for grp in range(g):
        for row in range(rows[grp]):
            for kb in range(kb_count):
                e = 1.0
                for j in range(kb + 1):
                    x = float(a_scale[grp, row, j])
                    e = x if x != 0.0 else e
                if kb + 1 < kb_count:
                    x = float(a_scale[grp, row, kb + 1])
                    r[grp, row, kb] = torch.tensor(e, dtype=torch.float32) / torch.tensor(x if x != 0.0 else e)
                else:
                    r[grp, row, kb] = e
    return r


def regw_gemm(a_fp8, a_scale, b_fp4, b_scale, masked_m):
    """c as regw_gemm computes it: per 128-K block acc += B' A^T (products exact, fp32 sums), then
    acc *= the token column's factor; weights x their per-32 scale in fp16 (the whole fold)."""
    g, max_m, k = a_fp8.shape
    n = b_fp4.shape[1]
    rows = clamp_rows(masked_m, max_m)
    ratio = rescale_factors(a_scale, rows)
    c = torch.zeros(g, max_m, n, dtype=torch.bfloat16)
    for grp in range(g):
        if rows[grp] == 0:
            continue
        w = (e2m1_decode(unpack_fp4(b_fp4[grp])) * b_scale[grp].repeat_interleave(32, dim=1)).to(torch.float16)
        a = a_fp8[grp, :rows[grp]].to(torch.float16)
        zero = (a_scale[grp, :rows[grp]] == 0).repeat_interleave(128, dim=1)
        a = torch.where(zero, a * 0, a)
        acc = torch.zeros(rows[grp], n)
        for kb in range(k // 128):
            blk = slice(128 * kb, 128 * kb + 128)
            acc = (acc + (a[:, blk].double() @ w[:, blk].double().T).float()) * ratio[grp, :rows[grp], kb, None]
        c[grp, :rows[grp]] = acc.to(torch.bfloat16)
    return c


@FORM_CASES
def test_register_weights_form_is_the_definitions_sum(max_m, masked_m, how):
    inputs = small_inputs(max_m, masked_m, seed=3, how=how)
    c = regw_gemm(*inputs)
    o64 = grouped_gemm_oracle(*inputs)
    assert torch.isclose(c.double(), o64, atol=1e-2, rtol=1e-2).all()
