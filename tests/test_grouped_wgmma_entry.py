"""The CUDA grouped solution's entry without a GPU: every bad argument is refused by name before
anything is built, and a CPU tensor is refused as not on a Hopper GPU."""

import pytest
import torch

from lowbit_gemm.solutions import load_solution

DEF = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
main = load_solution(DEF, "lowbit", "cuda_fp4_wgmma")


def inputs(g=4, max_m=8, n=2048, k=2048):
    return (torch.zeros(g, max_m, k, dtype=torch.float8_e4m3fn), torch.ones(g, max_m, k // 128),
            torch.zeros(g, n, k // 2, dtype=torch.int8), torch.ones(g, n, k // 32),
            torch.full((g,), max_m, dtype=torch.int32), 8, torch.empty(g, max_m, n, dtype=torch.bfloat16))


@pytest.mark.parametrize("position, bad, match", [
    (0, torch.zeros(4, 8, 2048, dtype=torch.float16), "a_fp8"),
    (1, torch.ones(4, 8, 15), "a_scale"),
    (2, torch.zeros(4, 2048, 1000, dtype=torch.int8), "b_fp4"),
    (3, torch.ones(4, 2048, 64, dtype=torch.float16), "b_scale"),
    (4, torch.zeros(4, dtype=torch.float32), "masked_m"),
    (5, 2.5, "expected_m"),
    (6, torch.empty(4, 8, 2048, dtype=torch.float32), "c"),
])
def test_bad_arguments_are_named(position, bad, match):
    args = list(inputs())
    args[position] = bad
    with pytest.raises(ValueError, match=match):
        main.run(*args)


def test_cpu_tensors_are_refused_as_not_hopper():
    with pytest.raises(ValueError, match="Hopper"):
        main.run(*inputs())


@pytest.mark.parametrize("max_m, rows, tile", [
    (1, 1, (8, 32)), (8, 8, (8, 32)), (16, 8, (16, 32)), (4096, 16, (16, 32)), (32, 17, (32, 64)),
    (64, 32, (32, 64)), (64, 33, (128, 64)), (128, 128, (128, 64)), (256, 129, (128, 128)),
    (256, 256, (128, 128)), (512, 257, (256, 128, "register")), (512, 512, (256, 128, "register")),
    (4096, 1024, (256, 128, "register")), (4096, 1025, (128, 256, "prepared")), (4096, 4096, (128, 256, "prepared"))])
def test_tile_by_the_tiles_that_hold_rows(max_m, rows, tile):
    # the mma.sync tokens-as-N form while a bucket holds 8 rows or the hint says 16, the wgmma one
    # up to 32 rows; then 4 groups x 16 column tiles of 128: 128 x 64 tiles while those still fit
    # one wave of SMs, 128 x 128 up to 256 rows a group, the register-weights form up to 1024, past
    # that the prepared form
    assert main.tile_shape(4, rows, 2048, max_m) == tile
    assert tile in main.TILES


@pytest.mark.parametrize("max_m, rows", [(512, 300), (2048, 1025), (4096, 4096)])
def test_n_no_multiple_of_256_gets_the_register_weights_form_past_256_rows(max_m, rows):
    # past 1024 rows the prepared form's 256 weight rows do not divide n: the register-weights form
    assert main.tile_shape(4, rows, 2048 + 128, max_m) == (256, 128, "register")


@pytest.mark.parametrize("n", [128, 384, 2048 + 128, 4096])
@pytest.mark.parametrize("rows", [1, 16, 32, 100, 256, 1024, 1025, 4096])
def test_every_n_a_multiple_of_128_gets_a_tile_that_divides_it(n, rows):
    tile = main.tile_shape(4, rows, n, 4096)
    assert tile in main.TILES and n % tile[1] == 0


@pytest.mark.parametrize("tile", [(256, 64), (64, 64), (128, 128, "predecoded"), "128x128", 128])
def test_a_tile_the_kernel_lacks_is_named(tile):
    a, a_s, b, b_s, mm, _, c = inputs()
    with pytest.raises(ValueError, match="tile"):
        main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c, tile=tile)


def test_the_prepared_tile_needs_n_a_multiple_of_256():
    a, a_s, b, b_s, mm, _, c = inputs(n=384)
    with pytest.raises(ValueError, match=r"tile: \(128, 256, 'prepared'\) needs n .* multiple of 256, got 384"):
        main.grouped_gemm_fp8_fp4_masked(a, a_s, b, b_s, mm, c, tile=(128, 256, "prepared"))
