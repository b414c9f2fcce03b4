"""The workloads of both definitions, written deterministically (``scripts/gen_workloads.py``
runs ``main``).

  python scripts/gen_workloads.py [--root DIR] [--definition NAME ...]

Writes ``workloads/gemm/<def>.jsonl`` (one workload trace a line) and the constrained inputs in
``blob/workloads/gemm/<def>/<def>_<uuid>.safetensors`` under the repository root (or --root).
Every random draw comes from a CPU torch.Generator seeded from the case's name and every uuid is
a uuid5 of it, so a rerun reproduces every file byte for byte. Inputs the definitions constrain
(masked_m, UE8M0 b_scale, well-formed a_meta) always come from safetensors; unconstrained inputs
are real quantized data for small shapes and the harness's ``random`` for large ones, which keeps
blob/ under 40 MiB. The serving-shaped workloads (heavy-tailed activations, weights with outliers,
FP8 weights at e4m3's full range) say what each models in
``workloads/gemm/<def>.descriptions.json`` (uuid -> case and description), because
FlashInfer-Bench's Workload model keeps no field for it. Every tensor is checked against the
definition's shape and dtype before it is written.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import safetensors.torch
import torch

from .quantize import prune_2of4_fp4, quantize_act_fp8_per128, quantize_weight_fp4_per32
from .references import GROUPED, SPARSE
from .solutions import REPO_ROOT as ROOT

BLOB_LIMIT = 40 * 1024 * 1024
_NAMESPACE = uuid.UUID("6f1c2b9e-3a57-4d2b-9a4e-1b0c5d7e8f90")

G, N, K = 4, 2048, 2048
SPARSE_M_REAL = (1, 2, 7, 16, 32, 64, 128, 256, 512, 1024, 2048)  # a_vals and a_meta from pruning
SPARSE_M_META_ONLY = (4096, 8192)  # well-formed a_meta from pruning, a_vals left `random`
SPARSE_M_RANDOM_META = (64, 1000)  # a_meta left `random` (every byte pattern has a meaning)
DEFINITIONS_DIR = ROOT / "definitions" / "gemm"


def workload_uuid(definition: str, case: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{definition}/{case}"))


def generator(case: str) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(zlib.crc32(case.encode()))


def blob_relpath(definition: str, uid: str) -> str:
    return f"./blob/workloads/gemm/{definition}/{definition}_{uid}.safetensors"


# ----------------------------------------------------------------------------------------------
# Definition A: M-masked grouped FP8 x FP4 GEMM
# ----------------------------------------------------------------------------------------------

@dataclass
class GroupedCase:
    name: str
    max_m: int
    masked_m: List[int]
    expected_m: int
    real_a: bool = False  # real per-128 quantized Gaussian activations (else `random`)
    wide_scale: bool = False  # b_scale spread over >= 30 binades inside every 128-k block
    note: str = ""


def _around(gen: torch.Generator, max_m: int, frac: float) -> List[int]:
    """masked_m about frac * max_m per group (+-10%), never above max_m."""
    u = 0.9 + 0.2 * torch.rand(G, generator=gen, dtype=torch.float64)
    return [min(max_m, int(frac * max_m * x)) for x in u.tolist()]


def _deepgemm(gen: torch.Generator, e: int) -> Tuple[List[int], int]:
    """DeepGEMM's test pattern: masked_m[j] = int(e * U(0.7, 1.3)), expected_m = int(1.2 * e)."""
    u = 0.7 + 0.6 * torch.rand(G, generator=gen, dtype=torch.float64)
    return [int(e * x) for x in u.tolist()], int(1.2 * e)


def _hint(masked_m: List[int], max_m: int) -> int:
    rows = [min(max(m, 0), max_m) for m in masked_m]
    return max(1, int(1.2 * sum(rows) / len(rows)))


def grouped_cases() -> List[GroupedCase]:
    cases = [
        GroupedCase("max_m_1", 1, [1, 1, 0, 1], 1, real_a=True, note="max_m 1"),
        GroupedCase("decode_max_m_16", 16, [3, 16, 9, 1], 0, real_a=True, note="decode"),
        GroupedCase("decode_max_m_32", 32, [8, 32, 17, 25], 0, real_a=True, note="decode"),
        GroupedCase("decode_max_m_64", 64, [8, 21, 32, 13], 0, real_a=True, note="decode, 8-32 rows"),
        GroupedCase("decode_max_m_128", 128, [27, 9, 32, 18], 0, real_a=True, note="decode, 8-32 rows"),
        GroupedCase("wide_b_scale_max_m_128", 128, [20, 28, 16, 24], 0, real_a=True, wide_scale=True,
                    note="b_scale over >= 30 binades in every 128-k block"),
        GroupedCase("max_m_200_not_multiple_of_16", 200, [200, 143, 67, 1], 0, note="max_m % 16 != 0"),
        GroupedCase("all_empty_max_m_256", 256, [0, 0, 0, 0], 1, note="every masked_m 0"),
        GroupedCase("one_full_others_empty_max_m_256", 256, [0, 256, 0, 0], 0, note="one group full"),
        GroupedCase("out_of_range_masked_m_max_m_256", 256, [-7, 300, 0, 100], 0,
                    note="masked_m < 0 and > max_m are clamped"),
        GroupedCase("full_max_m_512", 512, [512, 512, 512, 512], 0, note="max_m 512 fully used"),
        GroupedCase("half_max_m_512", 512, [], 0, note="max_m 512 about half used"),
        GroupedCase("75pct_max_m_1024", 1024, [], 0, note="about 75% used"),
        GroupedCase("75pct_max_m_2048", 2048, [], 0, note="about 75% used"),
    ]
    for case in cases:
        gen = generator(f"{GROUPED}/{case.name}/masked_m")
        if case.name.startswith("half_"):
            case.masked_m = _around(gen, case.max_m, 0.5)
        elif case.name.startswith("75pct_"):
            case.masked_m = _around(gen, case.max_m, 0.75)
        if case.expected_m == 0:
            case.expected_m = _hint(case.masked_m, case.max_m)
    for e in (20, 192, 1024):
        name = f"deepgemm_e{e}_max_m_4096"
        masked, hint = _deepgemm(generator(f"{GROUPED}/{name}/masked_m"), e)
        cases.append(GroupedCase(name, 4096, masked, hint, note=f"DeepGEMM pattern, e={e}"))
    return cases


def real_b_scale(case: str) -> torch.Tensor:
    """UE8M0 scales from quantizing Gaussian weights per 32 (rows of different magnitude).

    Row standard deviations span 2^-10..2^-4 (0.001..0.06), the range of LLM projection
    weights. Outputs then stay O(1), as in serving: FlashInfer-Bench checks every element
    against atol = 1e-2 in absolute terms, which only measures accuracy at that scale (with
    rows up to 2^4, outputs reached ~1e3 and even the float32 baseline failed the check).
    """
    gen = generator(case)
    row_sigma = torch.exp2(torch.empty(G, N, 1).uniform_(-10.0, -4.0, generator=gen))
    w = torch.randn(G, N, K, generator=gen) * row_sigma
    _, b_scale = quantize_weight_fp4_per32(w)
    return b_scale.contiguous()


def wide_b_scale(case: str) -> torch.Tensor:
    """Power-of-two scales spanning >= 30 binades inside every block of 4 scales (128 k-values).

    The largest scales sit where real weights do (2^-6..2^-4), the smallest 30 or more binades
    below, so outputs stay O(1) while every block still defeats an exponent fold.
    """
    gen = generator(case)
    exps = torch.randint(-40, -3, (G, N, K // 32), generator=gen)
    exps[..., 0::4] = torch.randint(-40, -35, exps[..., 0::4].shape, generator=gen)
    exps[..., 2::4] = torch.randint(-6, -3, exps[..., 2::4].shape, generator=gen)
    return torch.exp2(exps.to(torch.float32)).contiguous()


def real_activations(case: str, max_m: int) -> Tuple[torch.Tensor, torch.Tensor]:
    gen = generator(case)
    token_sigma = torch.exp2(torch.empty(G, max_m, 1).uniform_(-2.0, 1.0, generator=gen))
    x = torch.randn(G, max_m, K, generator=gen) * token_sigma
    a_fp8, a_scale = quantize_act_fp8_per128(x)
    return a_fp8.contiguous(), a_scale.contiguous()


def grouped_workloads(root: Path, written: Dict[Path, int]) -> List[dict]:
    shared_uid = workload_uuid(GROUPED, "shared_b_scale")
    shared_path = blob_relpath(GROUPED, shared_uid)
    _save(root, shared_path, {"b_scale": real_b_scale(f"{GROUPED}/shared_b_scale")}, written, GROUPED)
    lines = []
    for case in grouped_cases():
        uid = workload_uuid(GROUPED, case.name)
        path = blob_relpath(GROUPED, uid)
        tensors = {"masked_m": torch.tensor(case.masked_m, dtype=torch.int32)}
        inputs = {"a_fp8": {"type": "random"}, "a_scale": {"type": "random"},
                  "b_fp4": {"type": "random"}}
        if case.real_a:
            tensors["a_fp8"], tensors["a_scale"] = real_activations(f"{GROUPED}/{case.name}/a", case.max_m)
            for key in ("a_fp8", "a_scale"):
                inputs[key] = {"type": "safetensors", "path": path, "tensor_key": key}
        if case.wide_scale:
            tensors["b_scale"] = wide_b_scale(f"{GROUPED}/{case.name}/b_scale")
            inputs["b_scale"] = {"type": "safetensors", "path": path, "tensor_key": "b_scale"}
        else:
            inputs["b_scale"] = {"type": "safetensors", "path": shared_path, "tensor_key": "b_scale"}
        inputs["masked_m"] = {"type": "safetensors", "path": path, "tensor_key": "masked_m"}
        inputs["expected_m"] = {"type": "scalar", "value": case.expected_m}
        _save(root, path, tensors, written, GROUPED, {"max_m": case.max_m})
        lines.append(_trace(GROUPED, uid, {"max_m": case.max_m}, inputs))
    return lines


# Serving-shaped grouped workloads: activations with outlier channels, weights with outliers.

@dataclass
class ServingGroupedCase:
    name: str
    max_m: int
    frac: float  # rows used per group, about frac * max_m (+-10 %)
    what: str


SERVING_GROUPED = (
    ServingGroupedCase("serving_decode_max_m_64", 64, 0.375, "decode, ~24 rows a group"),
    ServingGroupedCase("serving_full_max_m_512", 512, 1.0, "prefill chunk, all 512 rows used"),
    ServingGroupedCase("serving_75pct_max_m_1024", 1024, 0.75, "prefill, ~768 rows a group"),
)
OUTLIER_WEIGHT_SHARE = 0.002  # share of weights 10-50x their row's typical size
OUTLIER_CHANNELS = 12  # activation channels 20-100x the median channel


def outlier_b_scale(case: str) -> torch.Tensor:
    """UE8M0 scales from quantizing weights per 32, rows of varied magnitude, with outliers.

    Row standard deviations span 2^-10..2^-4 as in real_b_scale (outputs stay O(1)); in every
    row OUTLIER_WEIGHT_SHARE of the weights are replaced by +-(10..50) x the row's standard
    deviation, as trained projection weights have. A 32-value block holding one gets a scale
    3-5 binades above its neighbours, so some 128-k blocks (4 scales) span >= 4 binades.
    """
    gen = generator(case)
    row_sigma = torch.exp2(torch.empty(G, N, 1).uniform_(-10.0, -4.0, generator=gen))
    w = torch.randn(G, N, K, generator=gen) * row_sigma
    hit = torch.rand(G, N, K, generator=gen) < OUTLIER_WEIGHT_SHARE
    size = torch.empty(G, N, K).uniform_(10.0, 50.0, generator=gen)
    sign = torch.where(torch.rand(G, N, K, generator=gen) < 0.5, -1.0, 1.0)
    w = torch.where(hit, sign * size * row_sigma, w)
    _, b_scale = quantize_weight_fp4_per32(w)
    return b_scale.contiguous()


def wide_block_share(b_scale: torch.Tensor, binades: int = 4) -> float:
    """Share of 128-k blocks (4 consecutive per-32 scales) whose scales span >= binades."""
    exps = torch.log2(b_scale).reshape(*b_scale.shape[:-1], -1, 4)
    return float(((exps.amax(-1) - exps.amin(-1)) >= binades).double().mean())


def outlier_activations(case: str, max_m: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Hidden states with heavy-tailed channel magnitudes, quantized per token x 128 to e4m3.

    Channel magnitudes are log-normal around 1 (sigma 0.5), and OUTLIER_CHANNELS channels,
    chosen per case, are 20-100x the median: LLM hidden states have such channels, and they
    decide each 128-block's a_scale. Token magnitudes span 2^-2..2^1 as in real_activations.
    """
    gen = generator(case)
    # exp in float64, rounded once to float32: torch's float32 exp differs by an ulp between CPU
    # vector widths (AVX2 / AVX-512), and the blobs must regenerate byte for byte on any machine
    channel = torch.exp(0.5 * torch.randn(K, generator=gen).double()).float()
    picks = torch.randperm(K, generator=gen)[:OUTLIER_CHANNELS]
    channel[picks] = torch.empty(OUTLIER_CHANNELS).uniform_(20.0, 100.0, generator=gen) * channel.median()
    token_sigma = torch.exp2(torch.empty(G, max_m, 1).uniform_(-2.0, 1.0, generator=gen))
    x = torch.randn(G, max_m, K, generator=gen) * token_sigma * channel
    a_fp8, a_scale = quantize_act_fp8_per128(x)
    return a_fp8.contiguous(), a_scale.contiguous()


def serving_grouped_workloads(root: Path, written: Dict[Path, int], notes: Dict[str, dict]) -> List[dict]:
    shared_uid = workload_uuid(GROUPED, "serving_outlier_b_scale")
    shared_path = blob_relpath(GROUPED, shared_uid)
    b_scale = outlier_b_scale(f"{GROUPED}/serving_outlier_b_scale")
    share = wide_block_share(b_scale)
    _save(root, shared_path, {"b_scale": b_scale}, written, GROUPED)
    lines = []
    for case in SERVING_GROUPED:
        uid = workload_uuid(GROUPED, case.name)
        path = blob_relpath(GROUPED, uid)
        masked_m = _around(generator(f"{GROUPED}/{case.name}/masked_m"), case.max_m, case.frac)
        tensors = {"masked_m": torch.tensor(masked_m, dtype=torch.int32)}
        tensors["a_fp8"], tensors["a_scale"] = outlier_activations(f"{GROUPED}/{case.name}/a", case.max_m)
        inputs = {key: {"type": "safetensors", "path": path, "tensor_key": key}
                  for key in ("a_fp8", "a_scale", "masked_m")}
        inputs["b_fp4"] = {"type": "random"}
        inputs["b_scale"] = {"type": "safetensors", "path": shared_path, "tensor_key": "b_scale"}
        inputs["expected_m"] = {"type": "scalar", "value": _hint(masked_m, case.max_m)}
        _save(root, path, tensors, written, GROUPED, {"max_m": case.max_m})
        lines.append(_trace(GROUPED, uid, {"max_m": case.max_m}, inputs))
        notes[uid] = {"case": case.name, "description": (
            f"Serving-shaped MoE expert GEMM, {case.what} (masked_m {masked_m}). Activations: "
            f"hidden states with {OUTLIER_CHANNELS} outlier channels 20-100x the median channel, "
            "quantized per token x 128 to e4m3. Weights: b_scale shared by the serving workloads, "
            "from quantizing per 32 rows of varied magnitude with "
            f"{100 * OUTLIER_WEIGHT_SHARE:g} % outlier weights 10-50x their row's size; "
            f"{100 * share:.1f} % of 128-k blocks have per-32 scales >= 4 binades apart. "
            "b_fp4 codes random.")}
    return lines


# ----------------------------------------------------------------------------------------------
# Definition B: 2:4-sparse FP4 x FP8 GEMM
# ----------------------------------------------------------------------------------------------

def pruned_a(case: str, m: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """a_vals, a_meta from magnitude-pruning Gaussian weights (2 largest |w| of each 4)."""
    gen = generator(case)
    w = torch.randn(m, K, generator=gen) * 2.0
    a_vals, a_meta = prune_2of4_fp4(w)
    return a_vals.contiguous(), a_meta.contiguous()


def sparse_workloads(root: Path, written: Dict[Path, int]) -> List[dict]:
    lines = []
    cases = [(f"pruned_m_{m}", m, "both") for m in SPARSE_M_REAL]
    cases += [(f"pruned_meta_random_vals_m_{m}", m, "meta") for m in SPARSE_M_META_ONLY]
    cases += [(f"random_meta_m_{m}", m, "none") for m in SPARSE_M_RANDOM_META]
    for name, m, stored in cases:
        uid = workload_uuid(SPARSE, name)
        path = blob_relpath(SPARSE, uid)
        inputs = {"a_vals": {"type": "random"}, "a_meta": {"type": "random"}, "b_fp8": {"type": "random"}}
        if stored != "none":
            a_vals, a_meta = pruned_a(f"{SPARSE}/{name}", m)
            tensors = {"a_meta": a_meta}
            if stored == "both":
                tensors["a_vals"] = a_vals
            for key in tensors:
                inputs[key] = {"type": "safetensors", "path": path, "tensor_key": key}
            _save(root, path, tensors, written, SPARSE, {"m": m})
        lines.append(_trace(SPARSE, uid, {"m": m}, inputs))
    return lines


# Serving-shaped sparse workloads: FP8 weights stored at e4m3's full range.

SERVING_SPARSE_PRUNED = (64, 129, 1024)  # a_vals and a_meta from pruning, stored
SERVING_SPARSE_RANDOM = (4096, 5000, 8192)  # a_vals and a_meta left `random` (harness draws)


def full_range_b_fp8(case: str) -> torch.Tensor:
    """b_fp8 [n, k] e4m3 scaled per tensor so that amax is exactly 448, e4m3's largest value.

    FP8 weights are stored that way (one per-tensor scale maps amax to 448). Three rows in four
    are Gaussian with row standard deviations over two binades, one in four is Student-t with
    3 degrees of freedom (heavy tails); the heavy-tailed rows set the amax.
    """
    gen = generator(case)
    row_sigma = torch.exp2(torch.empty(N, 1).uniform_(-1.0, 1.0, generator=gen))
    gauss = torch.randn(N, K, generator=gen)
    chi2 = sum(torch.randn(N, K, generator=gen) ** 2 for _ in range(3)) / 3
    student = torch.randn(N, K, generator=gen) / chi2.sqrt()
    heavy = (torch.rand(N, 1, generator=gen) < 0.25)
    w = torch.where(heavy, student, gauss) * row_sigma
    w = w * (448.0 / w.abs().max())
    b = w.clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return b.contiguous()


def serving_sparse_workloads(root: Path, written: Dict[Path, int], notes: Dict[str, dict]) -> List[dict]:
    shared_uid = workload_uuid(SPARSE, "serving_full_range_b_fp8")
    shared_path = blob_relpath(SPARSE, shared_uid)
    _save(root, shared_path, {"b_fp8": full_range_b_fp8(f"{SPARSE}/serving_full_range_b_fp8")}, written, SPARSE)
    lines = []
    cases = [(f"serving_pruned_m_{m}", m, True) for m in SERVING_SPARSE_PRUNED]
    cases += [(f"serving_random_a_m_{m}", m, False) for m in SERVING_SPARSE_RANDOM]
    for name, m, pruned in cases:
        uid = workload_uuid(SPARSE, name)
        path = blob_relpath(SPARSE, uid)
        inputs = {"a_vals": {"type": "random"}, "a_meta": {"type": "random"},
                  "b_fp8": {"type": "safetensors", "path": shared_path, "tensor_key": "b_fp8"}}
        if pruned:
            a_vals, a_meta = pruned_a(f"{SPARSE}/{name}", m)
            _save(root, path, {"a_vals": a_vals, "a_meta": a_meta}, written, SPARSE, {"m": m})
            for key in ("a_vals", "a_meta"):
                inputs[key] = {"type": "safetensors", "path": path, "tensor_key": key}
        a_what = ("A from magnitude-pruning Gaussian weights (well-formed 2:4)" if pruned else
                  "A drawn by the harness (random bytes: any E2M1 code, repeated positions)")
        lines.append(_trace(SPARSE, uid, {"m": m}, inputs))
        notes[uid] = {"case": name, "description": (
            f"Serving-shaped 2:4 sparse GEMM, m {m}: {a_what}, against b_fp8 shared by the "
            "serving workloads, FP8 weights as stored (per-tensor scale, amax exactly 448; "
            "Gaussian and Student-t rows).")}
    return lines


# ----------------------------------------------------------------------------------------------

def definition_json(definition: str) -> dict:
    return json.loads((DEFINITIONS_DIR / f"{definition}.json").read_text(encoding="utf-8"))


def check_tensors(definition: str, tensors: Dict[str, torch.Tensor], axes: Optional[Dict[str, int]] = None,
                  spec: Optional[dict] = None) -> None:
    """Raise ValueError unless every tensor is an input of the definition with its shape and dtype.

    axes gives the var axes' values; a tensor whose shape needs a var axis not given is checked
    on its other dimensions. spec: the definition JSON (default: definitions/gemm/<def>.json).
    """
    spec = spec or definition_json(definition)
    values = {k: a["value"] for k, a in spec["axes"].items() if a.get("type") == "const"}
    values.update(axes or {})
    for name, t in tensors.items():
        want = spec["inputs"].get(name)
        if want is None:
            raise ValueError(f"{definition}: tensor {name!r} is no input of the definition "
                             f"(inputs: {sorted(spec['inputs'])})")
        dtype = getattr(torch, want["dtype"])
        shape = [values.get(a) for a in (want["shape"] or [])]
        ok = t.dtype == dtype and t.dim() == len(shape) and all(
            w is None or w == s for w, s in zip(shape, t.shape))
        if not ok:
            expected = "[" + ", ".join(f"{a}={v}" if v is not None else a
                                       for a, v in zip(want["shape"] or [], shape)) + "]"
            raise ValueError(f"{definition}: tensor {name!r} is {t.dtype} {list(t.shape)}; "
                             f"the definition expects {want['dtype']} {expected}")


def _save(root: Path, relpath: str, tensors: Dict[str, torch.Tensor], written: Dict[Path, int],
          definition: str, axes: Optional[Dict[str, int]] = None) -> None:
    check_tensors(definition, tensors, axes)
    path = (root / relpath).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    safetensors.torch.save_file(dict(sorted(tensors.items())), str(path))
    written[path] = path.stat().st_size


def _trace(definition: str, uid: str, axes: Dict[str, int], inputs: Dict[str, dict]) -> dict:
    return {"definition": definition, "solution": None, "evaluation": None,
            "workload": {"uuid": uid, "axes": axes, "inputs": inputs}}


def generate(root: Path = ROOT, definitions: Optional[List[str]] = None) -> Dict[Path, int]:
    """Write the workloads of ``definitions`` (default both) under ``root``; return blob sizes."""
    makers = {GROUPED: (grouped_workloads, serving_grouped_workloads),
              SPARSE: (sparse_workloads, serving_sparse_workloads)}
    written: Dict[Path, int] = {}
    for definition in definitions or list(makers):
        blob_dir = root / "blob" / "workloads" / "gemm" / definition
        before = set(blob_dir.glob("*.safetensors")) if blob_dir.exists() else set()
        base, serving = makers[definition]
        notes: Dict[str, dict] = {}
        lines = base(root, written) + serving(root, written, notes)
        for stale in before - set(written):  # files of cases that no longer exist
            stale.unlink()
        jsonl = root / "workloads" / "gemm" / f"{definition}.jsonl"
        jsonl.parent.mkdir(parents=True, exist_ok=True)
        jsonl.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines), encoding="utf-8")
        sidecar = jsonl.with_name(f"{definition}.descriptions.json")
        sidecar.write_text(json.dumps(notes, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return written


def blob_size(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "blob").rglob("*") if p.is_file())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="dataset root (default: the repository)")
    parser.add_argument("--definition", action="append", choices=[GROUPED, SPARSE],
                        help="only this definition (repeatable)")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    generate(args.root.resolve(), args.definition)
    total = blob_size(args.root)
    print(f"blob/ total: {total / 2**20:.2f} MiB (limit {BLOB_LIMIT / 2**20:.0f} MiB)")
    if total >= BLOB_LIMIT:
        print("blob/ is over the size budget", file=sys.stderr)
        return 1
    return 0
