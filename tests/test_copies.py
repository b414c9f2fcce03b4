"""Files that self-contained solutions carry as copies stay byte-identical to their canonical one.

A solution must run where this package is not installed (the leaderboard builds it from its
own sources), so code that several solutions need (the launch cache, argument checks, bf16
rounding) is kept as one canonical file and copied, unchanged, into each solution that uses
it. COPIES lists them: canonical path -> the paths of its copies, all from the repository
root. Whoever adds a copy adds its row; an edit goes into the canonical file and is copied
out again, and this test fails until every copy matches.
"""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_LOWBIT = "solutions/lowbit/gemm"
_GROUPED = f"{_LOWBIT}/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
_SPARSE = f"{_LOWBIT}/sparse_gemm_fp4_fp8_n2048_k2048"
COPIES: dict[str, list[str]] = {
    # The compiled-kernel launch path (host time counts in FlashInfer-Bench's latency).
    f"{_GROUPED}/triton_fp4_exact_mma/fast_launch.py": [f"{_SPARSE}/triton_sparse_fp4_exact/fast_launch.py"],
    # Argument checks that name the argument.
    f"{_GROUPED}/triton_fp4_exact_mma/checks.py": [f"{_SPARSE}/triton_sparse_fp4_exact/checks.py",
                                                   f"{_SPARSE}/cuda_sparse_fp4_mma/checks.py",
                                                   f"{_GROUPED}/cuda_fp4_wgmma/checks.py",
                                                   f"{_GROUPED}/triton_fp4_dot_scaled/checks.py"],
    # The first-use build of a CUDA solution's library (sm_90a, cached by a hash of its sources).
    f"{_GROUPED}/cuda_fp4_wgmma/build.py": [f"{_SPARSE}/cuda_sparse_fp4_mma/build.py"],
    # The Hopper PTX building blocks (descriptors, mbarriers, wgmma fences) of the CUDA kernels.
    f"{_GROUPED}/cuda_fp4_wgmma/hopper_ptx.cuh": [f"{_SPARSE}/cuda_sparse_fp4_mma/hopper_ptx.cuh"],
    # The dense path's cuBLAS GEMM with fp32 sums (no bf16 split-K reductions).
    f"{_SPARSE}/triton_sparse_fp4_exact/dense_mm.py": [f"{_SPARSE}/cuda_sparse_fp4_mma/dense_mm.py"],
    # fp32 -> bf16 rounding of the stores (by hand under the interpreter).
    f"{_GROUPED}/triton_fp4_exact_mma/rounding.py": [f"{_SPARSE}/triton_sparse_fp4_exact/rounding.py",
                                                     f"{_GROUPED}/triton_fp4_dot_scaled/rounding.py"],
}

PAIRS = [(canonical, copy) for canonical, copies in COPIES.items() for copy in copies]


@pytest.mark.skipif(not PAIRS, reason="no deliberate copies listed in COPIES")
@pytest.mark.parametrize("canonical, copy", PAIRS or [("", "")], ids=[c for _, c in PAIRS] or ["none"])
def test_copy_is_byte_identical(canonical, copy):
    want = (ROOT / canonical).read_bytes()
    got = (ROOT / copy).read_bytes()
    assert got == want, f"{copy} has drifted from {canonical}: copy the canonical file over it"


def test_table_names_existing_files_once():
    listed = [c for c in COPIES] + [c for _, c in PAIRS]
    assert len(listed) == len(set(listed)), "a path appears twice in COPIES"
    missing = [p for p in listed if not (ROOT / p).is_file()]
    assert not missing, f"COPIES names files that do not exist: {missing}"
