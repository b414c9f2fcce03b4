"""CPU tests (Triton interpreter) of the sparse solution's two paths against the float64 oracle
at reduced sizes: every vals and meta byte (repeated positions summed, bits 4-7 ignored),
full-range e4m3 B, m 0, 1, 63, 65 and no multiple of a tile, and argument checks."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch

from lowbit_gemm.oracle import check_accuracy, sparse_gemm_oracle
from lowbit_gemm.solutions import load_solution
from definition_cases import sparse_cases

DEF = "sparse_gemm_fp4_fp8_n2048_k2048"
SOL = "triton_sparse_fp4_exact"
main = load_solution(DEF, "lowbit", SOL)
heur = load_solution(DEF, "lowbit", SOL, "heuristics")
PATHS = {"one_pass": heur.Tile(16, 64, True, 4, 1), "one_pass_rows_on_m": heur.Tile(32, 32, False, 4, 1, GROUP_M=2),
         "dense": "dense"}


def check(v, meta, b, path):
    c = torch.full((v.shape[0], b.shape[0]), float("nan"), dtype=torch.bfloat16)  # poisoned
    assert main.sparse_gemm_fp4_fp8(v, meta, b, c, tile=PATHS[path]) is c
    check_accuracy(c, sparse_gemm_oracle(v, meta, b))
    return c


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("case", [cid for cid, _ in sparse_cases()])
def test_cases_match_oracle(path, case):
    v, meta, b = dict(sparse_cases())[case]
    check(v, meta, b, path)


@pytest.mark.parametrize("path", list(PATHS))
def test_every_vals_and_meta_byte(path):
    """Each of the 256 vals bytes beside each of the 256 meta bytes, against a B of powers of
    two that tells the four positions apart exactly."""
    vals = torch.arange(256, dtype=torch.int64).repeat(4).to(torch.uint8).view(torch.int8).reshape(16, 64)
    meta = torch.arange(256, dtype=torch.int64).repeat_interleave(4).to(torch.uint8).view(torch.int8).reshape(16, 64)
    b = torch.exp2(torch.arange(256) % 4 * 2.0 - 2).repeat(24, 1) * torch.randn(24, 1).sign()
    check(vals, meta, b.to(torch.float8_e4m3fn), path)


@pytest.mark.parametrize("m,k", [(1, 256), (63, 384), (65, 128), (129, 256)])
def test_row_counts_off_the_tiles(m, k):
    gen = torch.Generator().manual_seed(m)
    v = torch.randint(-128, 128, (m, k // 4), generator=gen, dtype=torch.int8)
    meta = torch.randint(-128, 128, (m, k // 4), generator=gen, dtype=torch.int8)
    b = (torch.randn(40, k, generator=gen) * 100).clamp(-448, 448).to(torch.float8_e4m3fn)  # n 40: no tile multiple
    for path in PATHS:
        check(v, meta, b, path)
    c = torch.full((m, 40), float("nan"), dtype=torch.bfloat16)
    main.sparse_gemm_fp4_fp8(v, meta, b, c)  # the heuristic's own choice
    check_accuracy(c, sparse_gemm_oracle(v, meta, b))


def test_m_zero_is_a_no_op():
    b = torch.zeros(32, 128).to(torch.float8_e4m3fn)
    c = torch.empty(0, 32, dtype=torch.bfloat16)
    assert main.sparse_gemm_fp4_fp8(torch.empty(0, 32, dtype=torch.int8), torch.empty(0, 32, dtype=torch.int8), b, c) is c


def test_heuristic_paths():
    assert heur.choose(1) == heur.choose(heur.ONE_PASS_ROWS) == heur.RULES[0][1]
    assert heur.choose(heur.ONE_PASS_ROWS + 1) is None
    assert all(why for _, _, why in heur.RULES)


def test_run_checks_definition_constants():
    v = torch.zeros(2, 32, dtype=torch.int8)
    with pytest.raises(ValueError, match="b_fp8"):
        main.run(v, v, torch.zeros(64, 128).to(torch.float8_e4m3fn), torch.empty(2, 64, dtype=torch.bfloat16))


@pytest.mark.parametrize("bad", ["vals_dtype", "meta_shape", "b_dtype", "k", "c_shape", "contig", "tile"])
def test_bad_arguments_name_the_argument(bad):
    v = torch.zeros(4, 32, dtype=torch.int8)
    args = dict(a_vals=v, a_meta=v.clone(), b_fp8=torch.zeros(16, 128).to(torch.float8_e4m3fn),
                c=torch.empty(4, 16, dtype=torch.bfloat16))
    name = {"vals_dtype": "a_vals", "meta_shape": "a_meta", "b_dtype": "b_fp8", "k": "b_fp8", "c_shape": "c",
            "contig": "a_meta", "tile": "tile"}[bad]
    if bad == "vals_dtype":
        args["a_vals"] = v.float()
    elif bad == "meta_shape":
        args["a_meta"] = torch.zeros(4, 31, dtype=torch.int8)
    elif bad == "b_dtype":
        args["b_fp8"] = torch.zeros(16, 128)
    elif bad == "k":
        args["b_fp8"] = torch.zeros(16, 96).to(torch.float8_e4m3fn)
        args["a_vals"] = args["a_meta"] = torch.zeros(4, 24, dtype=torch.int8)
    elif bad == "c_shape":
        args["c"] = torch.empty(4, 17, dtype=torch.bfloat16)
    elif bad == "contig":
        args["a_meta"] = torch.zeros(32, 4, dtype=torch.int8).t()
    elif bad == "tile":
        args["tile"] = (16, 64)
    with pytest.raises(ValueError, match=name):
        main.sparse_gemm_fp4_fp8(**args)
