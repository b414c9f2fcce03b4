"""Number formats shared by quantizers, oracles and tests.

One place defines what the bits mean, so the workload generator, the float64 oracles and
the tests can never disagree with each other about a format:

- FP4 E2M1: 4-bit codes, bit 3 is the sign, codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  Two codes share a byte: the low nibble is the even element, the high nibble the odd one.
- UE8M0: an unsigned power-of-two scale; the definitions store it as float32.
- 2:4 sparse metadata: per group of 4 along K, one byte of two E2M1 codes (a_vals) and one
  byte of two 2-bit positions (a_meta, bits 0-1 and 2-3; bits 4-7 ignored). A repeated
  position sums both values.

Kernels do not import this module (solutions must be self-contained); tests check the
kernels against the oracles built on it.
"""

from __future__ import annotations

import torch

E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
E4M3_MAX = 448.0

# code -> value for all 16 codes; code 8 is -0.0.
E2M1_VALUES = torch.tensor(
    list(E2M1_MAGNITUDES) + [-v for v in E2M1_MAGNITUDES], dtype=torch.float32
)


def _as_codes(codes: torch.Tensor) -> torch.Tensor:
    """Integer tensor of any dtype -> int64 codes in 0..15 (raises on anything else)."""
    if codes.dtype.is_floating_point or codes.dtype == torch.bool:
        raise ValueError(f"codes: expected an integer tensor, got {codes.dtype}")
    codes = codes.to(torch.int64)
    if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) > 15):
        raise ValueError("codes: expected values in 0..15 (one E2M1 code each)")
    return codes


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (0..15, any integer dtype) -> float32 values."""
    codes = _as_codes(codes)
    return E2M1_VALUES.to(codes.device)[codes]


def e2m1_encode(x: torch.Tensor) -> torch.Tensor:
    """Round float values to the nearest E2M1 value (ties to the even code); -> uint8 codes.

    Magnitudes above 6 saturate to 6, as a quantizer that already divided by the scale
    expects. NaN is rejected: there is no E2M1 code for it.
    """
    if torch.isnan(x).any():
        raise ValueError("x: NaN has no E2M1 code")
    mags = torch.tensor(E2M1_MAGNITUDES, dtype=torch.float64, device=x.device)
    ax = x.abs().to(torch.float64).clamp(max=E2M1_MAX)
    # A tie sits exactly halfway between two neighbours, one with an even code (mantissa 0):
    # a bias far below any grid gap makes the even one win, as round-half-to-even asks.
    odd_bias = (torch.arange(8, device=x.device) % 2) * 1e-9
    mag_code = ((ax.unsqueeze(-1) - mags).abs() + odd_bias).argmin(dim=-1)
    sign = (x < 0) & (mag_code > 0)
    return (mag_code + 8 * sign.to(torch.int64)).to(torch.uint8)


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes [..., k] (k even) -> int8 bytes [..., k/2]; low nibble = even element."""
    codes = _as_codes(codes)
    if codes.shape[-1] % 2:
        raise ValueError(f"codes: last dimension must be even, got {codes.shape[-1]}")
    byte = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return byte.to(torch.uint8).view(torch.int8)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """int8/uint8 bytes [..., k/2] -> uint8 codes [..., k] (low nibble first)."""
    if packed.dtype not in (torch.int8, torch.uint8):
        raise ValueError(f"packed: expected int8 or uint8, got {packed.dtype}")
    b = packed.view(torch.uint8).to(torch.int64)
    codes = torch.stack((b & 0xF, b >> 4), dim=-1)
    return codes.reshape(*packed.shape[:-1], packed.shape[-1] * 2).to(torch.uint8)


def ue8m0_ceil(x: torch.Tensor) -> torch.Tensor:
    """Smallest power of two >= x (float32); x below the smallest normal float32 maps to 2**-126.

    A UE8M0 scale chosen this way never lets |w| / scale exceed the format's maximum.
    """
    x = x.to(torch.float32).clamp(min=torch.finfo(torch.float32).tiny)
    return torch.exp2(torch.ceil(torch.log2(x)))


def is_power_of_two(x: torch.Tensor) -> torch.Tensor:
    """Elementwise: positive finite normal float32 with a zero mantissa."""
    bits = x.to(torch.float32).view(torch.int32)
    exp = (bits >> 23) & 0xFF
    return (bits & 0x7FFFFF == 0) & (exp > 0) & (exp < 255) & (bits >= 0)


def pack_sparse_a(codes: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """codes [m, g, 2] (E2M1), positions [m, g, 2] (0..3) -> (a_vals int8 [m,g], a_meta int8 [m,g]).

    Element 0 of each pair goes to the low nibble of a_vals and to meta bits 0-1.
    """
    codes = _as_codes(codes)
    positions = positions.to(torch.int64)
    if positions.shape != codes.shape or codes.shape[-1] != 2:
        raise ValueError("codes/positions: expected matching shapes [..., 2]")
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) > 3):
        raise ValueError("positions: expected values in 0..3")
    vals = codes[..., 0] | (codes[..., 1] << 4)
    meta = positions[..., 0] | (positions[..., 1] << 2)
    return vals.to(torch.uint8).view(torch.int8), meta.to(torch.uint8).view(torch.int8)


def unpack_sparse_a(a_vals: torch.Tensor, a_meta: torch.Tensor):
    """(a_vals, a_meta) -> (codes [m,g,2] int64, positions [m,g,2] int64); meta bits 4-7 dropped."""
    for name, t in (("a_vals", a_vals), ("a_meta", a_meta)):
        if t.dtype not in (torch.int8, torch.uint8):
            raise ValueError(f"{name}: expected int8 or uint8, got {t.dtype}")
    if a_vals.shape != a_meta.shape:
        raise ValueError(f"a_meta: expected shape {tuple(a_vals.shape)}, got {tuple(a_meta.shape)}")
    v = a_vals.view(torch.uint8).to(torch.int64)
    m = a_meta.view(torch.uint8).to(torch.int64)
    codes = torch.stack((v & 0xF, v >> 4), dim=-1)
    positions = torch.stack((m & 3, (m >> 2) & 3), dim=-1)
    return codes, positions


def sparse_a_dense(a_vals: torch.Tensor, a_meta: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Dense A [m, 4g] from the 2:4 encoding; a repeated position sums both values."""
    codes, positions = unpack_sparse_a(a_vals, a_meta)
    m, g = a_vals.shape
    values = e2m1_decode(codes).to(dtype)
    dense = torch.zeros(m, g, 4, dtype=dtype, device=a_vals.device)
    dense.scatter_add_(2, positions, values)
    return dense.reshape(m, 4 * g)


def e4m3_from_bits(bits: torch.Tensor) -> torch.Tensor:
    """uint8/int8 bit patterns -> float8_e4m3fn tensor (a view, no rounding involved)."""
    return bits.to(torch.uint8).view(torch.float8_e4m3fn)
