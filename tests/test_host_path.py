"""The CUDA solutions' host path on a CPU: run() down to the C entry, the built library replaced by
a stub that records each entry's arguments (tools/host_path.py). Each call hands the C entry this
call's pointers, the plan's sizes and tile, and the current stream, in the order the entry
declares them; an error code comes back as an exception; plans never carry a call's pointers."""

import importlib.util
import shutil
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("host_path", ROOT / "tools" / "host_path.py")
host_path = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host_path)

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                                reason="no C compiler for the stub library")


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return host_path.build_stub(tmp_path_factory.mktemp("stub"))


def ptrs(*tensors):
    return [t.data_ptr() for t in tensors]


@pytest.mark.parametrize("max_m, hint, masked_dtype, tile", [
    (64, 32, torch.int32, (32, 64)), (64, 32, torch.int64, (32, 64)), (1, None, torch.int32, (8, 32)),
    (512, 512, torch.int32, (256, 128)), (4096, 2048, torch.int32, (128, 256))])
def test_grouped_entry_gets_this_calls_pointers_sizes_and_stream(lib, max_m, hint, masked_dtype, tile):
    with host_path.stubbed(host_path.GROUPED, lib) as main:
        for _ in range(2):  # the second call takes the cached plan, with fresh tensors
            a, a_s, b, b_s, mm, _, c = host_path.grouped_args(max_m, hint)
            mm = mm.to(masked_dtype)
            assert main.run(a, a_s, b, b_s, mm, hint, c) is c
            got = host_path.recorded(lib)
            assert got.entry == "lowbit_grouped_wgmma"
            *head, ws, stream = got.args
            assert head == [*ptrs(a, a_s, b, b_s, mm), int(masked_dtype == torch.int64), c.data_ptr(),
                            4, max_m, 2048, 2048, *tile]
            assert stream == host_path.STREAM
            assert (ws != 0) == (tile in ((256, 128), (128, 256)))  # the forms with a first pass


@pytest.mark.parametrize("m, path", [(1, "small"), (64, "small"), (192, "small"), (1024, "sparse_mma")])
def test_sparse_entry_gets_this_calls_pointers_sizes_and_stream(lib, m, path):
    with host_path.stubbed(host_path.SPARSE, lib) as main:
        for _ in range(2):
            vals, meta, b, c = host_path.sparse_args(m)
            assert main.run(vals, meta, b, c) is c
            got = host_path.recorded(lib)
            plan = next(iter(main._PLANS.values()))
            if path == "small":
                assert got.entry == "lowbit_sparse_small_m"
                assert got.args == [*ptrs(vals, meta, b, c), m, 2048, 2048, plan.mt, plan.nt, plan.ysplit,
                                    host_path.STREAM]
                assert plan.ysplit == -(-m // (8 * plan.nt))
            else:
                assert got.entry == "lowbit_sparse_wgmma_sp"
                assert got.args[:4] == ptrs(vals, meta, b, c) and got.args[4] != 0  # the call's workspace
                assert got.args[5:] == [m, 2048, 2048, plan.mw, plan.bn, plan.splits, host_path.STREAM]


def test_an_error_code_from_the_entry_is_raised(lib):
    err = host_path.ctypes.c_int.in_dll(lib, "stub_err")
    err.value = 700
    try:
        with host_path.stubbed(host_path.GROUPED, lib) as main:
            with pytest.raises(RuntimeError, match="CUDA error 700"):
                main.run(*host_path.grouped_args(64, 32))
        with host_path.stubbed(host_path.SPARSE, lib) as main:
            with pytest.raises(RuntimeError, match="CUDA error 700"):
                main.run(*host_path.sparse_args(64))
    finally:
        err.value = 0


def test_nothing_is_launched_for_no_rows(lib):
    before = host_path.ctypes.c_int.in_dll(lib, "stub_calls").value
    with host_path.stubbed(host_path.GROUPED, lib) as main:
        main.run(*host_path.grouped_args(0, None))
    with host_path.stubbed(host_path.SPARSE, lib) as main:
        main.run(*host_path.sparse_args(0))
    after = host_path.ctypes.c_int.in_dll(lib, "stub_calls").value
    assert after == before


@pytest.mark.parametrize("hint", [32.0, "32", 2.5])
def test_a_hint_that_is_no_int_is_refused_after_an_int_one_made_the_plan(lib, hint):
    with host_path.stubbed(host_path.GROUPED, lib) as main:
        args = list(host_path.grouped_args(64, 32))
        main.run(*args)
        args[5] = hint
        with pytest.raises(ValueError, match="expected_m"):
            main.run(*args)


def test_a_misaligned_tensor_is_named_with_a_plan_cached(lib):
    with host_path.stubbed(host_path.SPARSE, lib) as main:
        vals, meta, b, c = host_path.sparse_args(64)
        main.run(vals, meta, b, c)
        c_off = torch.empty(64 * 2048 + 8, dtype=torch.bfloat16)[1:1 + 64 * 2048].view(64, 2048)
        with pytest.raises(ValueError, match="c: expected a 16-byte aligned tensor"):
            main.run(vals, meta, b, c_off)
