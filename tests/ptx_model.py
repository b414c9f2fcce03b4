"""Python models of the PTX integer instructions and layouts the CUDA kernels' CPU model tests
port: prmt (on ints and elementwise on numpy arrays), fp16 bits, and where a 128-byte-swizzled
K-major shared-memory tile keeps an element (the layout a wgmma descriptor with SWIZZLE_128B,
SBO 1024 reads); and source_has, which ties a port to the source lines it follows."""

import numpy as np

M32 = 0xFFFFFFFF


def prmt(a: int, b: int, sel: int) -> int:
    """prmt.b32 (default mode): byte i of the result is byte sel[4i..4i+2] of {b, a} (a = bytes
    0-3), or that byte's sign replicated when sel bit 4i+3 is set."""
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for i in range(4):
        nib = (sel >> (4 * i)) & 0xF
        byte = src[nib & 7]
        if nib & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * i)
    return out


def prmt_np(a, b, sel):
    """prmt elementwise on numpy arrays (int64 holding uint32 words)."""
    a, b, sel = np.broadcast_arrays(*(np.asarray(z, dtype=np.int64) for z in (a, b, sel)))
    src = np.stack([(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)])
    out = np.zeros(a.shape, dtype=np.int64)
    for i in range(4):
        nib = (sel >> (4 * i)) & 0xF
        byte = np.take_along_axis(src, (nib & 7)[None], 0)[0]
        byte = np.where(nib & 8, np.where(byte & 0x80, 0xFF, 0), byte)
        out |= byte << (8 * i)
    return out


def source_has(src: str, *lines: str) -> None:
    """Each line occurs in the source text: a port fails loudly when the code it follows changes."""
    for line in lines:
        assert line in src, line


def h2f(bits: int) -> float:
    return float(np.array([bits & 0xFFFF], dtype=np.uint16).view(np.float16)[0])


def f2h(x: float) -> int:
    return int(np.array([x], dtype=np.float16).view(np.uint16)[0])


def sw128_offset(row: int, k: int, rows: int, elem_bytes: int = 2) -> int:
    """Byte offset of element (row, k) in a K-major tile of `rows` rows stored as 64-element
    (128-byte) swizzle atoms: atom k // 64 holds all rows, 128 bytes a row, its 16-byte chunks
    XOR-ed with row % 8."""
    per_row = 128 // elem_bytes
    atom, e = divmod(k, per_row)
    byte = e * elem_bytes
    return atom * rows * 128 + row * 128 + (((byte // 16) ^ (row % 8)) * 16) + byte % 16
