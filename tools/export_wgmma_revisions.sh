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
    # the kernel and every header of that revision (the set of headers differs between revisions)
    for f in $(git ls-tree --name-only "$rev" "$D/" | grep -E '\.(cu|cuh)$'); do
        git show "$rev:$f" > "variants/$name/$(basename "$f")"
    done
    echo "variants/$name/grouped_wgmma.cu"
done
