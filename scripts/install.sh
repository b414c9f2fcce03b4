#!/usr/bin/env bash
# The one install step of this repo (used by both README commands and by .ci/run).
#
#  1. torch: kept as it is when importable (a CUDA build on a GPU host stays); otherwise the
#     pinned CPU build torch==2.13.0 is installed (never an unpinned torch, which could pull
#     a multi-GB CUDA build).
#  2. flashinfer-bench==0.1.2 with --no-deps: its declared tree pulls flashinfer-python and
#     several GB the harness does not need.
#  3. the harness's and this repo's real needs.
#  4. this repo itself, editable, --no-deps (step 3 already installed what it needs).
#
# Idempotent: every step is skipped when already satisfied, so a second run takes seconds.
set -euo pipefail

cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
PIP=("$PY" -m pip install --disable-pip-version-check --no-input)

have() { "$PY" - "$@" <<'PYEOF'
import importlib, sys
for mod in sys.argv[1:]:
    try:
        importlib.import_module(mod)
    except Exception:
        sys.exit(1)
PYEOF
}

if have torch; then
    echo "[install] torch present: $("$PY" -c 'import torch; print(torch.__version__)') (kept)"
else
    # On this project's machines the pip configuration finds the local CPU wheel
    # (torch-2.13.0+cpu). Elsewhere set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
    # (or a CUDA index) to choose the build.
    echo "[install] no torch importable: installing torch==2.13.0 (CPU build)"
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
        "${PIP[@]}" "torch==2.13.0" --index-url "$TORCH_INDEX_URL"
    else
        "${PIP[@]}" "torch==2.13.0"
    fi
fi

if [ "$("$PY" -c 'import importlib.metadata as m; print(m.version("flashinfer-bench"))' 2>/dev/null || true)" = "0.1.2" ]; then
    echo "[install] flashinfer-bench 0.1.2 present"
else
    echo "[install] flashinfer-bench==0.1.2 (--no-deps)"
    "${PIP[@]}" --no-deps "flashinfer-bench==0.1.2"
fi

NEEDS=("pydantic>=2" safetensors docstring-parser numpy triton tqdm matplotlib pytest)
MODULES=(pydantic safetensors docstring_parser numpy triton tqdm matplotlib pytest)
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    NEEDS+=(tomli); MODULES+=(tomli)  # tomllib is in the standard library from 3.11 on
fi

if have "${MODULES[@]}"; then
    echo "[install] runtime and test needs present"
else
    echo "[install] runtime and test needs"
    # The constraint keeps pip from replacing the torch chosen above (triton may ask for one).
    TORCH_VER="$("$PY" -c 'import torch; print(torch.__version__.split("+")[0])')"
    CONSTRAINTS="$(mktemp)"
    trap 'rm -f "$CONSTRAINTS"' EXIT
    echo "torch==${TORCH_VER}" > "$CONSTRAINTS"
    "${PIP[@]}" -c "$CONSTRAINTS" "${NEEDS[@]}"
fi

if "$PY" -c 'import lowbit_gemm, sys, pathlib; sys.exit(0 if pathlib.Path(lowbit_gemm.__file__).resolve().is_relative_to(pathlib.Path("src").resolve()) else 1)' 2>/dev/null; then
    echo "[install] lowbit-gemm (editable) present"
else
    echo "[install] lowbit-gemm (editable, --no-deps)"
    "${PIP[@]}" --no-deps -e .
fi

"$PY" -c 'import torch, flashinfer_bench, lowbit_gemm; print(f"[install] ok: torch {torch.__version__}, cuda={torch.cuda.is_available()}")'
