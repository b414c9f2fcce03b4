"""fast_launch.Launch without a GPU: a stand-in kernel records how it was launched.

On CUDA, the first call per tensor-alignment pattern goes through kernel[grid] (Triton
compiles and specializes there) and every later one through the kept CompiledKernel's run,
with the plan's integers and the trailing constexprs appended; off the GPU every call goes
through kernel[grid]."""

from types import SimpleNamespace

import torch

from lowbit_gemm.solutions import load_solution

fast_launch = load_solution("grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048", "lowbit", "triton_fp4_exact_mma",
                            "fast_launch")


class FakeCompiled:
    function, packed_metadata = "fn", "meta"

    def __init__(self, log):
        self.log = log

    def run(self, gx, gy, gz, stream, function, packed, launch_metadata, enter, exit_hook, *args):
        self.log.append(("run", (gx, gy, gz), stream, args))

    def launch_metadata(self, grid, stream, *args):
        return None


class FakeKernel:
    """kernel[grid](*args, **consts) -> a CompiledKernel; params name the positional arguments
    and the constexprs after them (the last one defaulted)."""

    def __init__(self):
        self.log = []
        names = ["x", "y", "M", "N", "BM", "FLAG"]
        self.params = [SimpleNamespace(name=n, default=(7 if n == "FLAG" else None)) for n in names]

    def __getitem__(self, grid):
        def launch(*args, **consts):
            self.log.append(("grid", tuple(grid), args, consts))
            return FakeCompiled(self.log)
        return launch


def test_compiled_path_after_the_first_call(monkeypatch):
    monkeypatch.setattr(fast_launch, "INTERPRET", False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda dev: 1234, raising=False)
    kern = FakeKernel()
    launch = fast_launch.Launch(kern, (3, 2, 1), (10, 20), dict(BM=64, num_warps=4), torch.device("cuda", 0))
    x, y = torch.zeros(64), torch.zeros(64)
    launch(x, y)
    launch(x, y)
    assert kern.log[0] == ("grid", (3, 2, 1), (x, y, 10, 20), dict(BM=64, num_warps=4))
    assert kern.log[1][:3] == ("run", (3, 2, 1), 1234)
    assert kern.log[1][3] == (x, y, 10, 20, 64, 7)  # tensors, integers, BM, FLAG at its default
    # another alignment of y is another specialization: through kernel[grid] once more
    y_odd = torch.zeros(65)[1:]
    launch(x, y_odd)
    launch(x, y_odd)
    assert [e[0] for e in kern.log] == ["grid", "run", "grid", "run"]


def test_off_the_gpu_every_call_goes_through_the_jit():
    kern = FakeKernel()
    launch = fast_launch.Launch(kern, (1, 1, 1), (5,), dict(BM=16), torch.device("cpu"))
    x = torch.zeros(4)
    launch(x, x)
    launch(x, x)
    assert [e[0] for e in kern.log] == ["grid", "grid"]
    assert kern.log[1][2] == (x, x, 5)
