"""Each CUDA solution builds, host and device code, with its own build flags for sm_90a (nvcc
only, no GPU; the shared libraries of conftest's cuda_libraries), and ptxas spills no more bytes in any kernel than SPILL_STORES allows: a kernel
edit made where no GPU is at hand is checked for what the compiler can tell before it reaches
one. Skipped where nvcc is not on PATH."""

import shutil
from pathlib import Path

import pytest

from lowbit_gemm.cuda_compile import cuda_solution_folders, nvcc, spill_stores

ROOT = Path(__file__).resolve().parents[1]
# every CUDA solution of this project that builds itself
FOLDERS = {folder.name: folder for folder in cuda_solution_folders(ROOT / "solutions" / "lowbit")}

# Spill-store bytes per kernel (ptxas -v, nvcc 13.0, sm_90a), the most each may have; where a
# kernel spills, grouped_gemm_wgmma.md says where. A kernel the compiler reports that is missing
# here fails the test, so a new one gets its row.
SPILL_STORES = {
    "cuda_fp4_wgmma": {
        "grouped_sync_kernel<2, 2, 1>": 0, "grouped_sync_kernel<2, 1, 2>": 0,
        "grouped_swapped_kernel<32, 4>": 4,
        "grouped_wgmma_kernel<64>": 0, "grouped_wgmma_kernel<128>": 28,
        "regw::regw_gemm": 0,
        "prepared::prepare_kernel<true>": 0, "prepared::prepare_kernel<false>": 0,
        "prepared::prepared_gemm": 40,
    },
    "cuda_sparse_fp4_mma": {
        "sparse_small_m_kernel": 0, "dense_operands_kernel": 0,
        "sp_wgmma::prep": 0, "sp_wgmma::sp_gemm<2, 128>": 0, "sp_wgmma::sp_gemm<1, 128>": 0,
        "sp_wgmma::sp_gemm<1, 64>": 0,
    },
}


def budget_row(name: str, budget: dict) -> str:
    """The budget's key for a kernel: its whole name, or for the few-rows and dense-operand
    kernels, whose template instantiations are many, the name without template arguments."""
    return name if name in budget else name.split("<")[0]


def test_spills_of_a_hand_written_log_are_read_per_kernel():
    log = ("ptxas info    : Compiling entry function '_ZN12_GLOBAL__N_14regw9regw_gemmEPKh' for 'sm_90a'\n"
           "ptxas info    : Function properties for _ZN12_GLOBAL__N_14regw9regw_gemmEPKh\n"
           "    8 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n")
    if shutil.which("c++filt") is None:
        pytest.skip("c++filt not on PATH")
    assert spill_stores(log) == {"regw::regw_gemm": 4}


def test_every_cuda_solution_has_a_spill_budget():
    assert set(FOLDERS) == set(SPILL_STORES) and set(FOLDERS) >= {"cuda_fp4_wgmma", "cuda_sparse_fp4_mma"}


@pytest.mark.skipif(nvcc() is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("solution", sorted(FOLDERS))
def test_cuda_solution_compiles_for_sm90a_within_its_spill_budget(solution, cuda_libraries):
    compiled = cuda_libraries[solution]
    assert all(c.ok for c in compiled), "\n".join(c.log[-4000:] for c in compiled if not c.ok)
    found = {}
    for c in compiled:
        found.update(spill_stores(c.log))
    budget = SPILL_STORES.get(solution, {})
    assert found, "ptxas -v reported no kernels"
    unknown = sorted(name for name in found if budget_row(name, budget) not in budget)
    assert not unknown, f"kernels without a row in SPILL_STORES[{solution!r}]: {unknown}"
    over = {name: (stores, budget[budget_row(name, budget)]) for name, stores in found.items()
            if stores > budget[budget_row(name, budget)]}
    assert not over, f"spill stores (found, budget) over the budget: {over}"
