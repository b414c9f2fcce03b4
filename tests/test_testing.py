"""The input builders: shapes and dtypes in definition order, determinism, and the property
each builder is named for."""

import torch

from lowbit_gemm import numerics as nx
from lowbit_gemm import testing as tt


def test_grouped_inputs_follow_the_definition():
    a, a_s, b, b_s, mm, hint = tt.grouped_inputs(5, [5, 0, -3, 99], n=64, k=256)
    assert a.shape == (4, 5, 256) and a.dtype == torch.float8_e4m3fn
    assert a_s.shape == (4, 5, 2) and a_s.dtype == torch.float32
    assert b.shape == (4, 64, 128) and b.dtype == torch.int8
    assert b_s.shape == (4, 64, 8) and nx.is_power_of_two(b_s).all()
    assert mm.dtype == torch.int32 and mm.tolist() == [5, 0, -3, 99]
    assert hint == tt.expected_m_hint([5, 0, -3, 99], 5) == int(1.2 * 10 / 4)


def test_builders_are_deterministic():
    one, two = tt.grouped_random_inputs(3, [1, 2], n=32, k=128, seed=7), tt.grouped_random_inputs(3, [1, 2], n=32, k=128, seed=7)
    for x, y in zip(one[:5], two[:5]):
        assert torch.equal(x.view(torch.uint8) if x.dtype == torch.float8_e4m3fn else x,
                           y.view(torch.uint8) if y.dtype == torch.float8_e4m3fn else y)


def test_outlier_activations_have_hot_channels():
    x = tt.outlier_activations((2, 8, 256), seed=0, channels=3, factor=50.0)
    per_channel = x.abs().amax(dim=(0, 1))
    assert (per_channel > 20).sum() == 3


def test_e4m3_full_range_reaches_448():
    b = tt.e4m3_full_range((64, 256), seed=0).to(torch.float32)
    assert b.abs().max() == nx.E4M3_MAX


def test_sparse_builders():
    a_vals, a_meta, b = tt.sparse_pruned_inputs(6, n=32, k=256)
    _, pos = nx.unpack_sparse_a(a_vals, a_meta)
    assert a_vals.shape == a_meta.shape == (6, 64) and b.shape == (32, 256)
    assert (pos[..., 0] < pos[..., 1]).all()  # well-formed
    _, meta, _ = tt.sparse_random_inputs(6, n=32, k=256, pruned_meta=True)
    _, pos = nx.unpack_sparse_a(a_vals, meta)
    assert (pos[..., 0] < pos[..., 1]).all()
    _, meta, _ = tt.sparse_all_meta_bytes()
    assert sorted(meta.view(torch.uint8).flatten().tolist()) == list(range(256))


def test_e2m1_grid_is_exact_and_nan_output_is_nan():
    x = tt.e2m1_grid((4, 32), seed=0)
    assert torch.equal(nx.e2m1_decode(nx.e2m1_encode(x)), x)
    assert tt.nan_output((2, 3)).isnan().all()


def test_wide_b_scale_spans_thirty_binades_per_block():
    s = tt.wide_b_scale(1, 8, 256, seed=0)
    exps = torch.log2(s).reshape(1, 8, 2, 4)
    assert nx.is_power_of_two(s).all()
    assert ((exps.amax(-1) - exps.amin(-1)) >= 30).all()
