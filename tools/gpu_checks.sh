#!/usr/bin/env bash
# The GPU work the open kernel changes need, as named steps; each writes <step>.log under $OUT
# (the device tool's folder; ./gpu-logs elsewhere) and prints its exit code and last line.
#   tools/gpu_checks.sh probe               # about 2 minutes
#   tools/gpu_checks.sh tests memcheck racecheck   # TESTS_LIMIT=, MEMCHECK_LIMIT=, RACECHECK_LIMIT= seconds (300 each)
#   tools/gpu_checks.sh variants            # variants/*/grouped_wgmma.cu (tools/export_wgmma_revisions.sh)
#   tools/gpu_checks.sh sparse-tiles        # the sparse one-pass kernel's tile grid at small m
#   tools/gpu_checks.sh sparse-memcheck sparse-racecheck   # the sparse CUDA solution, every tile
#   tools/gpu_checks.sh sparse-probe        # the sparse CUDA few-rows kernel's tiles against Triton
#   tools/gpu_checks.sh sparse-paths        # the sparse CUDA solution's paths, forced, checked and timed
#   tools/gpu_checks.sh trace k-sweep       # where a stage's cycles go; fixed + per-stage time
#   tools/gpu_checks.sh bench               # the main job (about 8 minutes): $OUT/docs, $OUT/traces
#   tools/gpu_checks.sh ops-streams         # the library's 'auto' on the GPU; the grouped workspace forms on two streams
#   tools/gpu_checks.sh sparse-proxy        # the sparse MMA tiles at 256-1024 rows beside the grouped
#                                           # register-weights form on one group (the no-B-pass proxy)
#   tools/gpu_checks.sh tokens-as-n         # the 32 x 64 form forced at every bucket, then timed against
#                                           # variants/*/grouped_wgmma.cu on the decode-like and 4096 buckets
set -u
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

run_step() {  # name, time limit (s), command...
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*"
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "   rc=$? | $(tail -n 1 "$OUT/$name.log")"
}

SMALL="cuda_fp4_wgmma and (rows_1_63_65_128 or out_of_range or wide_b_scale or max_m_1- or mma_sync)"
SPARSE="cuda_every_tile or (cuda_sparse_mma_rows and (m257 or m1000)) or (cuda_sparse_fp4_mma and (pruned_m_1- or pruned_m_65 or every_meta_byte))"
for step in "$@"; do
    case $step in
        probe) run_step probe 300 python3 tools/probe_grouped_wgmma.py ;;
        tests) run_step tests ${TESTS_LIMIT:-300} python3 -m pytest -q tests/gpu ;;  # solutions for other GPUs skip themselves
        memcheck) run_step memcheck ${MEMCHECK_LIMIT:-300} compute-sanitizer --tool memcheck --error-exitcode 1 \
                      python3 -m pytest -q tests/gpu -k "$SMALL" ;;
        racecheck) run_step racecheck ${RACECHECK_LIMIT:-300} compute-sanitizer --tool racecheck --error-exitcode 1 \
                       python3 -m pytest -q tests/gpu -k "$SMALL" ;;
        variants) run_step variants 400 python3 tools/time_wgmma_variants.py variants/*/grouped_wgmma.cu ;;
        sparse-memcheck) run_step sparse-memcheck ${MEMCHECK_LIMIT:-300} compute-sanitizer --tool memcheck --error-exitcode 1 \
                             python3 -m pytest -q tests/gpu/test_gpu_sparse.py -k "$SPARSE" ;;
        # not the forced dense tile: racecheck reports hazards inside cuBLAS's own GEMM kernels
        sparse-racecheck) run_step sparse-racecheck ${RACECHECK_LIMIT:-300} compute-sanitizer --tool racecheck --error-exitcode 1 \
                              python3 -m pytest -q tests/gpu/test_gpu_sparse.py -k "($SPARSE) and not dense" ;;
        sparse-probe) run_step sparse-probe 400 python3 tools/probe_sparse_mma.py --no-host ;;
        sparse-tiles) run_step sparse-tiles 300 python3 tools/sweep_sparse_tiles.py ;;
        sparse-paths) run_step sparse-paths 200 python3 tools/time_sparse_paths.py ;;
        trace) run_step trace 200 bash -c "python3 tools/trace_wgmma_stages.py 64 32 32x64 && python3 tools/trace_wgmma_stages.py 64 32 128x64 && python3 tools/trace_wgmma_stages.py 512 512 128x128" ;;
        k-sweep) run_step k-sweep 300 python3 tools/k_sweep_wgmma.py variants/*/grouped_wgmma.cu ;;
        # the results pages under $OUT/docs (copied into docs/ by hand), the harness traces under $OUT/traces
        bench) run_step bench 580 python3 scripts/run_benchmark.py --docs "$OUT/docs"
               mkdir -p "$OUT/traces" && cp -r traces/. "$OUT/traces/" ;;
        sparse-proxy) run_step sparse-proxy 300 python3 tools/time_sparse_paths.py --ms 256,384,512,1024 \
                          --paths wgmma_sp_128_n64_k2,wgmma_sp_128_k2,wgmma_sp_128 --regw-proxy ;;
        ops-streams) run_step ops-streams 300 python3 -m pytest -q tests/gpu/test_gpu_ops.py tests/gpu/test_gpu_grouped.py \
                         -k "test_gpu_ops or two_streams" ;;
        tokens-as-n) run_step tokens-as-n-tests 200 python3 -m pytest -q tests/gpu/test_gpu_grouped.py \
                         -k "cuda_kernel_at_every_tile and 32x64"
                     run_step tokens-as-n-times 300 python3 tools/time_wgmma_variants.py --tiles 32x64 --shapes \
                         "max_m 1;max_m 16;max_m 64, 8-32;max_m 128;max_m 64, 12-64;4096 ~20;4096 empty;256 ~76" \
                         variants/*/grouped_wgmma.cu ;;
        *) echo "unknown step: $step (probe tests memcheck racecheck variants sparse-tiles sparse-memcheck sparse-racecheck sparse-probe sparse-paths trace k-sweep bench ops-streams tokens-as-n sparse-proxy)"; exit 2 ;;
    esac
done
