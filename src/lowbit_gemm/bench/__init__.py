"""Benchmark and report: the harness, our own cold-L2 graph-replay timing, ceilings and floors.

Modules, one job each:
- ceilings:  measure this GPU's copy bandwidth and bf16 / FP8 GEMM rates at the start of a run.
- roofline:  FLOPs and minimum bytes of a workload, the floors they imply, achieved fractions.
- timing:    CUDA-graph replay of many calls with L2 made cold by rotating input sets; median.
- harness:   run FlashInfer-Bench 0.1.2's Benchmark on a subset; traces appended under traces/.
- published: the published (B200) figures, kept apart from every ratio.
- report:    docs/results.md from one run's results.
- plots:     one PNG per definition under docs/img/.
- cpu_check: without a CUDA GPU, check every solution's kernels on CPU (TRITON_INTERPRET=1).
"""
