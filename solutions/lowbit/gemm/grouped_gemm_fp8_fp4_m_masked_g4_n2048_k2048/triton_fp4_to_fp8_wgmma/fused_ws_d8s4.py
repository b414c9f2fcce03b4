"""Run 78 experiment: fused_ws with 8 decoder warps, four blocks a stage at 16 and 32 tokens."""
from . import fused_ws as _base

PLAN = {16: (4, 3, 8), 32: (4, 3, 8), 64: (2, 4, 8)}


def launch(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms):
    return _base.launch(a_fp8, a_scale, b_fp4, b_scale, masked_m, c, num_sms, plan=PLAN)
