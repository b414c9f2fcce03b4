"""Writes timing-only ablation copies of the CUDA grouped kernel (cuda_fp4_wgmma) into
variants/<prefix>_<name>/: each takes parts of one form's work away (its results are wrong on
purpose), so that the times say what each part costs. A name lists the parts taken away by their
letters; base is the kernel as it is.

form producer (variants/abl_*, for tools/time_wgmma_variants.py --no-check --tiles 128x128):
  A  the consumers' loads of A (constant fragments)
  P  the promotion (the block sums added once, at the end)
  W  the wait for each stage's MMAs
form regw, the register-weights form and its first pass (variants/regw_*, for --tiles 256x128 or
tools/k_sweep_wgmma.py --tiles 256x128):
  R  the rescale after each block          D  the decode (each block multiplies the first's fragments)
  N  the consumers' waits for a stage      W  the waits for a block's MMAs (one at the end)
  P  the first pass's work (gate words 0)  G  the GEMM (it returns at once)
  E  the epilogue's stores of c
  python3 tools/make_ablations.py regw base R D DR DRNWP DRNWPE P G
  python3 tools/time_wgmma_variants.py variants/regw_*/grouped_wgmma.cu --tiles 256x128 --no-check
form swapped, the tokens-as-N form on wgmma (variants/swn_*, for --tiles 32x64):
  Z  the zeros of the rows past masked_m     D  the weights' decode (raw code words multiplied)
  F  the stage's proxy fence (generic stores -> wgmma's reads)"""

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048/cuda_fp4_wgmma"
FILES = ("grouped_wgmma.cu", *sorted(p.name for p in SRC.glob("*.cuh")))  # the kernel and every header it includes

# form -> part -> [(file, text in it, its ablation form)]: each text must occur exactly once. A
# part's switch is the macro ABL_<part>, defined 0 or 1 at the top of grouped_wgmma.cu.
PRODUCER = {
    "A": [("grouped_producer.cuh",
           "        a_nxt0[q] = __ldg(reinterpret_cast<const uint2*>(pa0 + 32 * q));\n"
           "        a_nxt1[q] = __ldg(reinterpret_cast<const uint2*>(pa1 + 32 * q));",
           "        if (ABL_A) { a_nxt0[q] = make_uint2(0x38383838u + q, 0x38383838u); a_nxt1[q] = a_nxt0[q]; } else {\n"
           "        a_nxt0[q] = __ldg(reinterpret_cast<const uint2*>(pa0 + 32 * q));\n"
           "        a_nxt1[q] = __ldg(reinterpret_cast<const uint2*>(pa1 + 32 * q)); }")],
    "P": [("grouped_producer.cuh", "        if (mode == 0u) {\n          promote_rows(acc, blk, sa0, sa1);",
           "        if (ABL_P) {\n        } else if (mode == 0u) {\n          promote_rows(acc, blk, sa0, sa1);"),
          ("grouped_producer.cuh", "    // the epilogue's tile, read again rather than kept",
           "    wgmma_wait<0>();\n    if (ABL_P) { for (int i = 0; i < BN / 2; ++i) acc[i] += blk[i]; }\n"
           "    // the epilogue's tile, read again rather than kept")],
    "W": [("grouped_producer.cuh", "        wgmma_commit();\n        wgmma_wait<0>();\n        STAGE_TRACE(gs, 6, tid == 0);  // MMA done",
           "        wgmma_commit();\n        if (!ABL_W) wgmma_wait<0>();\n        STAGE_TRACE(gs, 6, tid == 0);  // MMA done")],
}
REGW = {
    "R": [("grouped_regw.cuh", "    rescale(slot[1]);\n", "    if (!ABL_R) rescale(slot[1]);\n")],
    "D": [("grouped_regw.cuh", "    if (kb + 1 < KB) bad = !decode_block(x, nxt) || bad;\n"
           "    if (kb + 3 < KB) x = load_codes(c0, c1, s0, s1, kb + 3);\n",
           "    if (!ABL_D && kb + 1 < KB) bad = !decode_block(x, nxt) || bad;\n"
           "    if (!ABL_D && kb + 3 < KB) x = load_codes(c0, c1, s0, s1, kb + 3);\n"),
          ("grouped_regw.cuh", "  bad = !decode_block(xa, fa);\n",
           "  bad = !decode_block(xa, fa);\n  if (ABL_D) decode_block(xb, fb);\n")],
    "N": [("grouped_regw.cuh", "      mbar_wait(bars + s, ph);\n      STAGE_TRACE(kb, 1, tid == 128 && st == 0);  // tokens there\n",
           "      if (!ABL_N) mbar_wait(bars + s, ph);\n      STAGE_TRACE(kb, 1, tid == 128 && st == 0);  // tokens there\n")],
    "W": [("grouped_regw.cuh", "    wgmma_wait<1>();\n    mbar_arrive(bars + STAGES + slot[0]);\n    wgmma_wait<0>();\n",
           "    if (!ABL_W) wgmma_wait<1>();\n    mbar_arrive(bars + STAGES + slot[0]);\n    if (!ABL_W) wgmma_wait<0>();\n"),
          ("grouped_regw.cuh", "  if (bad) atomicOr(&s_bad, 1);\n", "  wgmma_wait<0>();\n  if (bad) atomicOr(&s_bad, 1);\n")],
    "P": [("grouped_prepared.cuh", "  int cta = blockIdx.x;\n",
           "  int cta = blockIdx.x;\n  if (ABL_P) { if (t == 0) gate[blockIdx.x] = 0u; launch_dependents(); return; }\n")],
    "G": [("grouped_regw.cuh", "  if (fallback) return;", "  if (fallback || ABL_G) return;")],
    "E": [("grouped_regw.cuh", "    *reinterpret_cast<uint4*>(cg + static_cast<size_t>(tok) * n + 8 * ch) = v;\n",
           "    if (!ABL_E) *reinterpret_cast<uint4*>(cg + static_cast<size_t>(tok) * n + 8 * ch) = v;\n")],
}
SWAPPED = {
    "Z": [("grouped_tokens_as_n.cuh", "    zero_rows_async(c, rows_of, groups, max_m, n,",
           "    if (!ABL_Z) zero_rows_async(c, rows_of, groups, max_m, n,")],
    "D": [("grouped_tokens_as_n.cuh", "          e2m1x8_to_f16x2x4(w[0][s], d0);\n          e2m1x8_to_f16x2x4(w[1][s], d1);\n",
           "          e2m1x8_to_f16x2x4(w[0][s], d0);\n          e2m1x8_to_f16x2x4(w[1][s], d1);\n"
           "          if (ABL_D) { for (int b = 0; b < 4; ++b) { d0[b] = w[0][s]; d1[b] = w[1][s]; } }\n")],
    "F": [("grouped_tokens_as_n.cuh", '        asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");\n',
           '        if (!ABL_F) asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");\n')],
}
FORMS = {"producer": ("abl", PRODUCER), "regw": ("regw", REGW), "swapped": ("swn", SWAPPED)}


def edited(parts):
    """The kernel's files with every part's edit made (each behind its ABL_ switch)."""
    texts = {f: (SRC / f).read_text() for f in FILES}
    for part, edits in parts.items():
        for f, old, new in edits:
            if texts[f].count(old) != 1:
                raise SystemExit(f"{f} changed; update the edits of part {part!r} for:\n{old}")
            texts[f] = texts[f].replace(old, new)
    return texts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("form", choices=FORMS)
    ap.add_argument("names", nargs="+", help="variants: letters of the parts taken away, or base")
    args = ap.parse_args()
    prefix, parts = FORMS[args.form]
    texts = edited(parts)
    for name in args.names:
        taken = "" if name == "base" else name
        if set(taken) - set(parts):
            raise SystemExit(f"{name}: parts are letters of {''.join(parts)}")
        d = ROOT / "variants" / f"{prefix}_{name}"
        d.mkdir(parents=True, exist_ok=True)
        defs = "".join(f"#define ABL_{part} {int(part in taken)}\n" for part in parts)
        for f, text in texts.items():
            (d / f).write_text(defs + text if f == "grouped_wgmma.cu" else text)
        print(d / "grouped_wgmma.cu")


if __name__ == "__main__":
    main()
