"""Without a CUDA GPU, run every Triton kernel under the interpreter on the CPU.

TRITON_INTERPRET is read when a kernel is decorated, so it is set here, before any test
module imports triton or a solution.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
