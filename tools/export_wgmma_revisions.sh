#!/usr/bin/env bash
# Writes the CUDA grouped kernel's sources (grouped_wgmma.cu and its headers) of each git
# revision into variants/<revision>/, here, for tools/time_wgmma_variants.py to build and time on
# a GPU host (carry variants/ there; it is git-ignored through .git/info/exclude when listed).
#   tools/export_wgmma_revisions.sh main my-branch HEAD~1
set -euo pipefail
cd "$(dirname "$0")/.."
D=solutions/lowbit/gemm/grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048/cuda_fp4_wgmma
for rev in "$@"; do
    name=$(printf '%s' "$rev" | tr -c 'A-Za-z0-9._-' '_')
    rm -rf "variants/$name"
    mkdir -p "variants/$name"
    for f in grouped_wgmma.cu hopper_ptx.cuh wgmma_dense.cuh grouped_prepared.cuh grouped_regw.cuh; do
        # a revision before the prepared (register-weights) form has no grouped_prepared.cuh (grouped_regw.cuh)
        git cat-file -e "$rev:$D/$f" 2>/dev/null && git show "$rev:$D/$f" > "variants/$name/$f"
    done
    echo "variants/$name/grouped_wgmma.cu"
done
