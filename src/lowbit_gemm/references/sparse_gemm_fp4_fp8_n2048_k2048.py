import torch

# E2M1 (FP4) code -> value. Bits 0..2 index the magnitude, bit 3 is the sign (code 8 is -0).
E2M1_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


@torch.no_grad()
def run(a_vals, a_meta, b_fp8):
    """2:4-structured-sparse FP4 (E2M1) x dense FP8 (e4m3) GEMM: c = bf16(A @ B.T).

    A [m, 4g] is rebuilt from two E2M1 values per group of 4 columns and their positions.
    """
    m, g = a_vals.shape
    device = a_vals.device

    # Read both bytes as uint8.
    vals = a_vals.to(torch.int32) & 0xFF
    meta = a_meta.to(torch.int32) & 0xFF

    # Two E2M1 values per byte: x0 = low nibble, x1 = high nibble.
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)
    x = lut[torch.stack([vals & 0xF, vals >> 4], dim=-1).long()]  # [m, g, 2]

    # Their positions inside the group of 4: p0 = bits 0-1, p1 = bits 2-3; bits 4-7 ignored.
    pos = torch.stack([meta & 3, (meta >> 2) & 3], dim=-1).long()  # [m, g, 2]

    # Scatter-add, so a repeated position (p0 == p1) holds x0 + x1.
    a = torch.zeros(m, g, 4, dtype=torch.float32, device=device)
    a.scatter_add_(2, pos, x)
    a = a.reshape(m, 4 * g)

    # Dense GEMM with float32 accumulation.
    c = torch.matmul(a, b_fp8.to(torch.float32).t())  # [m, n]
    return c.to(torch.bfloat16)
