"""This GPU's own ceilings, measured at the start of a run so every ratio holds on it.

- copy bandwidth: a large device-to-device copy; bytes counted are read + write. This is what
  a streaming kernel can reach, usually 85-90% of the datasheet HBM figure.
- bf16 GEMM rate: torch.mm on 8192^3 random bf16 operands, a size large enough that cuBLAS
  runs near its peak. The compute floors divide by it: the exact kernels multiply 16-bit
  operands (fp16 and bf16 run at one rate on Hopper), because Hopper's FP8 MMA accumulates with
  about 14 bits and fails the elementwise check. The 2:4 sparse definition's floor divides by
  twice it, the sparse tensor cores' nominal factor (not measured here).
- FP8 GEMM rate: torch._scaled_mm on 8192^3 random e4m3 operands (bf16 out): the fastest
  dense tensor-core path on an H200 (no FP4 tensor cores there), shown beside, and the
  divisor of results recorded before the bf16 rate was measured.
All are medians over several CUDA-event timed repetitions.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Dict


@dataclass
class Ceilings:
    gpu: str
    sms: int
    l2_bytes: int
    copy_bytes_per_s: float
    fp8_flops_per_s: float
    bf16_flops_per_s: float = 0.0  # 0: not measured (results recorded before it was)
    versions: Dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Ceilings":
        return cls(**d)

    def compute_flops_per_s(self, sparse: bool) -> float:
        """The rate a compute floor divides by (module doc): the bf16 rate, doubled for the 2:4
        sparse definition; the FP8 rate for results without a bf16 rate."""
        if self.bf16_flops_per_s <= 0:
            return self.fp8_flops_per_s
        return self.bf16_flops_per_s * (2.0 if sparse else 1.0)


def _median_ms(fn, reps: int, warmup: int = 3) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure_copy_bandwidth(nbytes: int = 2 << 30, reps: int = 20) -> float:
    """Bytes/s of a device-to-device copy of nbytes (counting read + write)."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src), reps)
    del src, dst
    return 2 * nbytes / (ms * 1e-3)


def measure_bf16_gemm_rate(size: int = 8192, reps: int = 20) -> float:
    """FLOP/s of a dense bf16 x bf16 -> bf16 GEMM through torch.mm (fp32 accumulation)."""
    import torch

    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    ms = _median_ms(lambda: torch.mm(a, b, out=out), reps)
    return 2.0 * size ** 3 / (ms * 1e-3)


def measure_fp8_gemm_rate(size: int = 8192, reps: int = 20) -> float:
    """FLOP/s of a dense e4m3 x e4m3 -> bf16 GEMM through torch._scaled_mm."""
    import torch

    a = torch.randn(size, size, device="cuda").clamp_(-2, 2).to(torch.float8_e4m3fn)
    # _scaled_mm wants the second operand column-major: transpose a row-major tensor.
    b = torch.randn(size, size, device="cuda").clamp_(-2, 2).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda", dtype=torch.float32)
    ms = _median_ms(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                             out_dtype=torch.bfloat16), reps)
    return 2.0 * size ** 3 / (ms * 1e-3)


def versions() -> Dict[str, str]:
    import platform

    import torch

    out = {"python": platform.python_version(), "torch": torch.__version__,
           "cuda": str(torch.version.cuda)}
    from importlib import metadata

    # Installed distribution versions (a module's __version__ can be a dev placeholder).
    for dist in ("triton", "flashinfer-bench"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    if torch.cuda.is_available():
        out["capability"] = "sm_%d%d" % torch.cuda.get_device_capability()
    return out


def measure(quick: bool = False) -> Ceilings:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("ceilings need a CUDA GPU; none was found")
    props = torch.cuda.get_device_properties(0)
    reps = 5 if quick else 20
    return Ceilings(
        gpu=torch.cuda.get_device_name(0),
        sms=props.multi_processor_count,
        l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
        copy_bytes_per_s=measure_copy_bandwidth(reps=reps),
        fp8_flops_per_s=measure_fp8_gemm_rate(reps=reps),
        bf16_flops_per_s=measure_bf16_gemm_rate(reps=reps),
        versions=versions(),
    )
