"""Run 77 experiment: fused_ws with one 128-K block a stage, 8 stages (the kernel before run 76)."""
from . import fused_ws as _base

PLAN = {16: (1, 8), 32: (1, 8), 64: (1, 8)}


def launch(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms):
    return _base.launch(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms, plan=PLAN)
