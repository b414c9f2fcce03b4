"""The shared formats: E2M1 codes, nibble order, UE8M0 scales, 2:4 metadata, quantizers."""

import pytest
import torch

from lowbit_gemm import numerics as nx
from lowbit_gemm.quantize import prune_2of4_fp4, quantize_act_fp8_per128, quantize_weight_fp4_per32


def test_e2m1_table_matches_definition():
    want = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    got = nx.e2m1_decode(torch.arange(16))
    assert got.tolist() == want
    assert torch.signbit(got[8])  # code 8 is -0


def test_encode_rounds_half_to_even_and_saturates():
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -5.1, 0.26])
    assert nx.e2m1_decode(nx.e2m1_encode(x)).tolist() == [0, 1, 1, 2, 2, 4, 4, 6, -6, 0.5]
    with pytest.raises(ValueError, match="NaN"):
        nx.e2m1_encode(torch.tensor([float("nan")]))


def test_every_code_round_trips():
    codes = torch.arange(16)
    back = nx.e2m1_encode(nx.e2m1_decode(codes))
    assert back[:8].tolist() == list(range(8)) and back[9:].tolist() == list(range(9, 16))


def test_nibble_order_low_is_even_element():
    packed = nx.pack_fp4(torch.tensor([[1, 15]]))
    assert packed.view(torch.uint8).item() == 0xF1
    codes = torch.randint(0, 16, (3, 5, 64))
    assert torch.equal(nx.unpack_fp4(nx.pack_fp4(codes)), codes.to(torch.uint8))


def test_power_of_two_detection():
    x = torch.tensor([1.0, 2.0**-126, 2.0**127, 0.0, -2.0, 3.0, 2.0**-130, float("inf")])
    assert nx.is_power_of_two(x).tolist() == [True, True, True, False, False, False, False, False]
    assert nx.ue8m0_ceil(torch.tensor([3.0, 4.0, 0.3])).tolist() == [4.0, 4.0, 0.5]


def test_sparse_meta_repeated_position_sums_and_high_bits_ignored():
    vals = torch.tensor([[0x71]], dtype=torch.uint8).view(torch.int8)  # x0 = 0.5, x1 = 6
    meta = torch.tensor([[0xF5]], dtype=torch.uint8).view(torch.int8)  # p0 = 1, p1 = 1, high bits set
    assert nx.sparse_a_dense(vals, meta).tolist() == [[0.0, 6.5, 0.0, 0.0]]


def test_act_quantizer_per128_blocks():
    x = torch.randn(2, 3, 256) * torch.tensor([1e-3, 1.0, 50.0]).view(1, 3, 1)
    a, s = quantize_act_fp8_per128(x)
    assert a.dtype == torch.float8_e4m3fn and s.shape == (2, 3, 2)
    back = (a.float().reshape(2, 3, 2, 128) * s.unsqueeze(-1)).reshape_as(x)
    assert ((back - x).abs() <= 0.07 * x.abs().amax(-1, keepdim=True)).all()


def test_weight_quantizer_ue8m0_and_no_saturation():
    w = torch.randn(4, 8, 64) * 0.02
    b, s = quantize_weight_fp4_per32(w)
    assert b.shape == (4, 8, 32) and s.shape == (4, 8, 2) and nx.is_power_of_two(s).all()
    deq = nx.e2m1_decode(nx.unpack_fp4(b)).reshape(4, 8, 2, 32) * s.unsqueeze(-1)
    assert (deq.abs().reshape_as(w) <= 6 * s.repeat_interleave(32, -1)).all()
    assert ((deq.reshape_as(w) - w).abs() <= s.repeat_interleave(32, -1)).all()


def test_prune_keeps_two_largest_in_ascending_positions():
    w = torch.tensor([[0.5, -6.0, 3.0, 1.0]])
    vals, meta = prune_2of4_fp4(w)
    assert nx.sparse_a_dense(vals, meta).tolist() == [[0.0, -6.0, 3.0, 0.0]]
    codes, pos = nx.unpack_sparse_a(*prune_2of4_fp4(torch.randn(16, 64)))
    assert (pos[..., 0] < pos[..., 1]).all()
