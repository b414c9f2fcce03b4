"""The grouped kernel's PTX decode (kernel._PRMT_ASM_TEXT), executed on the CPU.

The Triton interpreter cannot run inline assembly, so the kernel tests take the portable
integer decode; this runs the asm text itself through a model of the few PTX instructions it
uses (prmt in its default mode, with sign replication) and compares every output byte with
E2M1(code) * 2**(dexp / 8) as e4m3, for all 16-bit halves of a word and every exponent
addend the scale fold produces.
"""

import re

import torch

from lowbit_gemm.numerics import e2m1_decode, e4m3_from_bits
from lowbit_gemm.solutions import load_solution

kernel = load_solution("grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048", "lowbit", "triton_fp4_to_fp8_wgmma", "kernel")
MASK = 0xFFFFFFFF


def prmt(a, b, sel):
    """PTX prmt.b32, default mode: byte i of the result is byte sel[4i:4i+3] of {b, a};
    with sel bit 4i+3 set, it is that byte's top bit replicated (0xFF or 0x00)."""
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    out = 0
    for i in range(4):
        nib = (sel >> (4 * i)) & 0xF
        byte = src[nib & 7]
        if nib & 8:
            byte = 0xFF if byte & 0x80 else 0
        out |= byte << (8 * i)
    return out


OPS = {"and.b32": lambda a, b: a & b, "or.b32": lambda a, b: a | b, "shl.b32": lambda a, b: (a << b) & MASK,
       "shr.u32": lambda a, b: a >> b}


def compile_asm(text):
    """The asm's instructions as (op, dst, srcs) with integer immediates."""
    prog = []
    for line in text.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        dst, *srcs = [t.strip() for t in args.split(",")]
        prog.append((op, dst, [t if t.startswith(("$", "%")) or t.isidentifier() else int(t, 0) for t in srcs]))
    return prog


def run_asm(prog, regs):
    """Execute a compiled asm on Python ints; regs maps "$i" (and temporaries) to values."""
    for op, dst, srcs in prog:
        v = [regs[t] if isinstance(t, str) else t for t in srcs]
        if op == "mov.b32":
            regs[dst] = v[0]
        elif op == "prmt.b32":
            regs[dst] = prmt(*v)
        else:
            regs[dst] = OPS[op](*v)
    return regs


E2M1 = e2m1_decode(torch.arange(16)).double().tolist()
E4M3 = e4m3_from_bits(torch.arange(256, dtype=torch.int64).to(torch.uint8)).double().tolist()


def test_asm_uses_only_modelled_instructions():
    for text in (kernel._PRMT_ASM_TEXT, kernel._PRMT_WORD_ASM_TEXT):
        ops = set(re.findall(r"^\s*([a-z]+\.[a-z0-9]+)\s", text, re.M))
        assert ops <= set(OPS) | {"mov.b32", "prmt.b32"}, ops


def test_prmt_decode_matches_e2m1_for_every_half_word_and_addend():
    gen = torch.Generator().manual_seed(0)
    # One word per 16-bit pattern in each half (the other half random): every code in
    # every position, and every pair of neighbouring codes.
    lo = torch.arange(65536, dtype=torch.int64)
    hi = torch.randint(0, 65536, (65536,), generator=gen, dtype=torch.int64)
    words = torch.cat([lo | (hi << 16), (lo << 16) | hi]).tolist()
    for text, table in ((kernel._PRMT_ASM_TEXT, "$7"), (kernel._PRMT_WORD_ASM_TEXT, "$4")):
        prog = compile_asm(text)
        for dexp in range(-40, 49, 8):
            lut0 = (0x3C383000 + dexp * 0x01010100) & MASK
            lut1 = (0x4C484440 + dexp * 0x01010101) & MASK
            scale = 2.0 ** (dexp // 8)
            # Every word once with the plain table (and the first asm), a sample otherwise.
            for word in words[:: 1 if dexp == 0 and table == "$7" else 61]:
                r = run_asm(prog, {"$2": word, "$3": lut0, table: lut1})
                out = r["$0"] | (r["$1"] << 32)
                for i in range(8):
                    got = E4M3[(out >> (8 * i)) & 0xFF]
                    want = E2M1[(word >> (4 * i)) & 15] * scale
                    assert got == want, (hex(word), dexp, i, got, want)
