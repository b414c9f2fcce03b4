import torch

# E2M1 (FP4) code -> value. Bits 0..2 index the magnitude, bit 3 is the sign (code 8 is -0).
E2M1_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


@torch.no_grad()
def run(a_fp8, a_scale, b_fp4, b_scale, masked_m, expected_m):
    """M-masked grouped FP8 x FP4 GEMM.

    For every group g:  c[g, :rows] = bf16(A_g[:rows] @ B_g.T)  and  c[g, rows:] = 0,
    with rows = clamp(masked_m[g], 0, max_m). expected_m is a scheduling hint only.
    """
    g, max_m, k = a_fp8.shape
    n = b_fp4.shape[1]
    device = a_fp8.device

    # A: FP8 e4m3 values times one float32 scale per 128 consecutive k (per token).
    a = a_fp8.to(torch.float32) * a_scale.to(torch.float32).repeat_interleave(128, dim=-1)

    # B: each byte (read as uint8) holds two E2M1 codes; the low nibble is element 2j,
    # the high nibble element 2j+1. One float32 scale (UE8M0 by intent) per 32 consecutive k.
    byte = b_fp4.to(torch.int32) & 0xFF
    codes = torch.stack([byte & 0xF, byte >> 4], dim=-1).reshape(g, n, k)
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)
    b = lut[codes.long()] * b_scale.to(torch.float32).repeat_interleave(32, dim=-1)

    # GEMM per group, float32 accumulation.
    c = torch.matmul(a, b.transpose(1, 2))  # [g, max_m, n]

    # Rows at or past clamp(masked_m[g], 0, max_m) are zero.
    rows = masked_m.to(torch.int64).clamp(0, max_m)
    valid = torch.arange(max_m, device=device)[None, :] < rows[:, None]  # [g, max_m]
    c = torch.where(valid[:, :, None], c, torch.zeros((), dtype=c.dtype, device=device))
    return c.to(torch.bfloat16)
