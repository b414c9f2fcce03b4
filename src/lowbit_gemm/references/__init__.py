"""The two definitions of this dataset, as data: axes, inputs, outputs, description, tags,
constraints, and the reference source file beside this module.

``scripts/make_definitions.py`` writes ``definitions/gemm/<name>.json`` from here and
``tests/test_definitions.py`` fails when a JSON is out of date. The reference files import only
torch: FlashInfer-Bench execs their text, where this package is not installed, so each keeps
its own E2M1 table instead of lowbit_gemm.numerics' (the tests hold them to the oracles).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict

GROUPED = "grouped_gemm_fp8_fp4_m_masked_g4_n2048_k2048"
SPARSE = "sparse_gemm_fp4_fp8_n2048_k2048"

_HERE = Path(__file__).resolve().parent

_E2M1 = (
    "E2M1 code to value: 0..7 -> 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign (code 8 is -0)."
)

_META: Dict[str, Dict[str, Any]] = {
    GROUPED: {
        "name": GROUPED,
        "op_type": "gemm",
        "description": (
            "M-masked grouped mixed FP8 x FP4 GEMM (4 groups, variable max_m, N=2048, K=2048), "
            "the MoE expert GEMM of DeepGEMM's m_grouped masked layout. "
            "A[g,r,k] = float(a_fp8[g,r,k]) * a_scale[g,r,k//128] (FP8 e4m3, one float32 scale "
            "per token per 128 k). Each byte of b_fp4, read as uint8, holds two E2M1 codes: the "
            "low nibble is element 2j, the high nibble element 2j+1. " + _E2M1 + " "
            "B[g,n,k] = e2m1(code) * b_scale[g,n,k//32]; b_scale is UE8M0 by intent (a power of "
            "two stored as float32) but the meaning holds for any float. For each group g, rows "
            "r < clamp(masked_m[g], 0, max_m) get c[g,r,:] = bf16(sum_k A[g,r,k] * B[g,:,k]) with "
            "float32 accumulation; every other row of c is zero. expected_m is a scheduling hint "
            "(int(1.2 * expected rows per group)) and never changes the result."
        ),
        "tags": [
            "op:grouped_gemm",
            "layout:m_masked",
            "quantization:fp8_e4m3_per_token_128",
            "quantization:fp4_e2m1_ue8m0_per_32",
            "stage:moe",
        ],
        "axes": {
            "g": {"type": "const", "value": 4, "description": "Number of groups (experts)."},
            "max_m": {
                "type": "var",
                "description": "Rows per group bucket; only the first masked_m[g] rows are valid.",
            },
            "n": {"type": "const", "value": 2048, "description": "Output columns per group."},
            "k": {"type": "const", "value": 2048, "description": "Reduction dimension."},
            "k_half": {
                "type": "const",
                "value": 1024,
                "description": "k / 2: bytes per row of b_fp4 (two E2M1 codes per byte).",
            },
            "k_a_blocks": {
                "type": "const",
                "value": 16,
                "description": "k / 128: scale blocks per row of A.",
            },
            "k_b_blocks": {
                "type": "const",
                "value": 64,
                "description": "k / 32: scale blocks per row of B.",
            },
        },
        "constraints": ["k == 2 * k_half", "k == 128 * k_a_blocks", "k == 32 * k_b_blocks"],
        "inputs": {
            "a_fp8": {
                "shape": ["g", "max_m", "k"],
                "dtype": "float8_e4m3fn",
                "description": "Activations, FP8 e4m3, per group.",
            },
            "a_scale": {
                "shape": ["g", "max_m", "k_a_blocks"],
                "dtype": "float32",
                "description": "Scale of a_fp8[g, r, 128*i : 128*(i+1)].",
            },
            "b_fp4": {
                "shape": ["g", "n", "k_half"],
                "dtype": "int8",
                "description": (
                    "Weights, two E2M1 codes per byte (as uint8): low nibble = element 2j, "
                    "high nibble = element 2j+1."
                ),
            },
            "b_scale": {
                "shape": ["g", "n", "k_b_blocks"],
                "dtype": "float32",
                "description": (
                    "Scale of B[g, n, 32*i : 32*(i+1)]; UE8M0 by intent (a power of two as "
                    "float32), any float is meaningful."
                ),
            },
            "masked_m": {
                "shape": ["g"],
                "dtype": "int32",
                "description": (
                    "Valid rows per group; clamped to [0, max_m]. Rows at or past it are zero."
                ),
            },
            "expected_m": {
                "shape": None,
                "dtype": "int32",
                "description": (
                    "Scheduling hint, int(1.2 * expected rows per group); never changes c."
                ),
            },
        },
        "outputs": {
            "c": {
                "shape": ["g", "max_m", "n"],
                "dtype": "bfloat16",
                "description": "Per-group product; rows at or past clamp(masked_m[g]) are zero.",
            }
        },
    },
    SPARSE: {
        "name": SPARSE,
        "op_type": "gemm",
        "description": (
            "2:4-structured-sparse mixed FP4 (E2M1) x FP8 (e4m3) GEMM (variable M, N=2048, "
            "K=2048): c = bf16(A @ float(b_fp8).T) with float32 accumulation. A [m, k] keeps two "
            "E2M1 values per group of 4 consecutive k-columns (g = k/4 groups). For row i and "
            "group j, read a_vals[i,j] and a_meta[i,j] as uint8: values x0 = e2m1(v & 0xF), "
            "x1 = e2m1(v >> 4); positions p0 = meta & 3, p1 = (meta >> 2) & 3; bits 4 to 7 of "
            "meta are ignored. " + _E2M1 + " A is zero except A[i, 4j+p0] += x0 and "
            "A[i, 4j+p1] += x1: a repeated position sums both values, so every byte pattern has "
            "a meaning. Well-formed 2:4 data has p0 < p1; that is the common case, not a promise."
        ),
        "tags": [
            "op:sparse_gemm",
            "sparsity:2_4",
            "quantization:fp4_e2m1",
            "quantization:fp8_e4m3",
        ],
        "axes": {
            "m": {"type": "var", "description": "Rows of A and c."},
            "n": {"type": "const", "value": 2048, "description": "Rows of b_fp8, columns of c."},
            "k": {"type": "const", "value": 2048, "description": "Reduction dimension."},
            "g": {
                "type": "const",
                "value": 512,
                "description": "k / 4: groups of 4 k-columns, 2 nonzeros kept per group.",
            },
        },
        "constraints": ["k == 4 * g"],
        "inputs": {
            "a_vals": {
                "shape": ["m", "g"],
                "dtype": "int8",
                "description": (
                    "Two E2M1 codes per byte (as uint8): low nibble x0, high nibble x1."
                ),
            },
            "a_meta": {
                "shape": ["m", "g"],
                "dtype": "int8",
                "description": (
                    "Positions inside the group of 4 (as uint8): p0 = bits 0-1 (of x0), "
                    "p1 = bits 2-3 (of x1); bits 4-7 ignored; p0 == p1 sums both values."
                ),
            },
            "b_fp8": {
                "shape": ["n", "k"],
                "dtype": "float8_e4m3fn",
                "description": "Dense FP8 e4m3 weights, unscaled.",
            },
        },
        "outputs": {
            "c": {"shape": ["m", "n"], "dtype": "bfloat16", "description": "A @ B.T in bf16."}
        },
    },
}

NAMES = (GROUPED, SPARSE)


def reference_path(name: str) -> Path:
    """The reference source file of definition ``name``."""
    return _HERE / f"{name}.py"


def reference_source(name: str) -> str:
    return reference_path(name).read_text(encoding="utf-8")


def definition_dict(name: str) -> Dict[str, Any]:
    """The full definition of ``name`` (what goes into its JSON), reference source included."""
    meta = _META[name]
    out = {key: meta[key] for key in ("name", "op_type", "description", "tags", "axes")}
    out["constraints"] = meta["constraints"]
    out["inputs"] = meta["inputs"]
    out["outputs"] = meta["outputs"]
    out["reference"] = reference_source(name)
    return out


def definition_json(name: str) -> str:
    """The exact text of ``definitions/gemm/<name>.json``."""
    return json.dumps(definition_dict(name), indent=2, ensure_ascii=False) + "\n"


def _load_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_lowbit_gemm_reference_{name}", reference_path(name))
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def load_reference(name: str) -> Callable[..., Any]:
    """The reference ``run`` of definition ``name``."""
    return _load_module(name).run
