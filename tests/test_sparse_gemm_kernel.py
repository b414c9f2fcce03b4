"""CPU tests of the 2:4 sparse FP4xFP8 GEMM solution under the Triton interpreter.

Every path (fused FP32-unit kernel, one-launch split-K tensor-core kernel, decode + FP8 GEMM,
fp16 decode of A and B + fp16 GEMM) is driven with explicit configs at
reduced n and k, against the float64 oracle; outputs are NaN-poisoned first.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402

from lowbit_gemm.oracle import check_accuracy, sparse_gemm_oracle  # noqa: E402
from lowbit_gemm.quantize import prune_2of4_fp4  # noqa: E402
from lowbit_gemm.solutions import load_solution  # noqa: E402

DEFINITION = "sparse_gemm_fp4_fp8_n2048_k2048"
sol = load_solution(DEFINITION, "lowbit", "triton_sparse_fp4_decode_wgmma")
H = load_solution(DEFINITION, "lowbit", "triton_sparse_fp4_decode_wgmma", entry="heuristics")
K = load_solution(DEFINITION, "lowbit", "triton_sparse_fp4_decode_wgmma", entry="kernel")
DEV = "cuda" if torch.cuda.is_available() else "cpu"

SMALL = H.SmallConfig(BM=4, BN=16, BK=128)
GEMMS = {p: H.GemmConfig(BM=16, BN=32, BK=64, num_warps=4, num_stages=2, path=p) for p in ("tma", "ptr", "fused")}
# Hopper's choice from F8_FROM_M rows: FP8 MMA promoted to fp32 every 32 products.
GEMMS["tma32"] = H.GemmConfig(BM=16, BN=32, BK=64, num_warps=4, num_stages=2, path="tma", acc_k=32)
GEMMS["tma_ws"] = H.GemmConfig(BM=16, BN=32, BK=64, num_warps=4, num_stages=2, path="tma", ws=True)
# Hopper's path: A and B decoded to fp16 workspaces in one launch, then the fp16 GEMM.
for p in ("tma", "ptr"):
    GEMMS[p + "16"] = H.GemmConfig(BM=16, BN=32, BK=32, num_warps=4, num_stages=2, path=p, f16=True)
# One-launch tensor-core path: split K with the in-kernel ticket reduction (several K steps
# per program), no split, and the decode lookup table. K % (split * BK) == 0 for every k used.
MMAS = {"mma_split2": H.MmaSmallConfig(BW=32, BT=16, BK=64, split=2),
        "mma_split4_lut": H.MmaSmallConfig(BW=16, BT=16, BK=32, split=4, acc_k=32, lut=True),
        "mma_nosplit": H.MmaSmallConfig(BW=32, BT=32, BK=128, split=1)}
# One launch, no split, full K per program: fp16 decode (Hopper) and e4m3 decode + _mma.
STREAMS = {"stream_f16": H.StreamConfig(BM=16, BN=16, BK=64, num_stages=3),
           "stream_e4m3": H.StreamConfig(BM=16, BN=32, BK=64, a_f16=False, acc_k=0)}
PATHS = ["small", "tma", "tma32", "tma_ws", "ptr", "fused", "tma16", "ptr16"] + list(MMAS) + list(STREAMS)


def _launch(path, a_vals, a_meta, b, c, small=SMALL):
    if path == "small":
        return sol.launch_small(a_vals, a_meta, b, c, small)
    if path in MMAS:
        return sol.launch_mma_small(a_vals, a_meta, b, c, MMAS[path])
    if path in STREAMS:
        return sol.launch_stream(a_vals, a_meta, b, c, STREAMS[path])
    return sol.launch_gemm(a_vals, a_meta, b, c, GEMMS[path])


def _inputs(m, n, k, meta="random", seed=0):
    g = torch.Generator().manual_seed(seed)
    a_vals = torch.randint(-128, 128, (m, k // 4), dtype=torch.int8, generator=g)
    if meta == "random":  # every byte value: high bits set, repeated positions
        a_meta = torch.randint(-128, 128, (m, k // 4), dtype=torch.int8, generator=g)
    else:
        w = torch.randn(m, k, generator=g) * 3
        a_vals, a_meta = prune_2of4_fp4(w)
    b = torch.randn(n, k, generator=g).clamp(-2, 2).to(torch.float8_e4m3fn)
    return a_vals.to(DEV), a_meta.to(DEV), b.to(DEV)


def _poisoned(m, n):
    return torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=DEV)


def _check(c, a_vals, a_meta, b):
    check_accuracy(c, sparse_gemm_oracle(a_vals, a_meta, b))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m,meta", [(1, "random"), (5, "wellformed"), (17, "random"), (33, "wellformed")])
def test_paths_match_oracle(path, m, meta):
    n, k = 64, 256
    a_vals, a_meta, b = _inputs(m, n, k, meta, seed=m)
    c = _poisoned(m, n)
    _launch(path, a_vals, a_meta, b, c)
    _check(c, a_vals, a_meta, b)


@pytest.mark.parametrize("path", PATHS)
def test_every_vals_and_meta_byte_exact(path):
    """All 256 a_vals bytes against all 16 position pairs (and high meta bits) with B = I:
    c must equal the dense A exactly, so any decode slip shows."""
    k = n = 128
    vals = torch.arange(256, dtype=torch.int32)
    metas = torch.arange(256, dtype=torch.int32)
    # 256 rows; row r cycles through every vals byte and uses meta byte (r + 37*j) % 256.
    j = torch.arange(k // 4, dtype=torch.int32)
    a_vals = ((vals[:, None] + 7 * j[None, :]) % 256).to(torch.uint8).view(torch.int8)
    a_meta = ((metas[:, None] + 37 * j[None, :]) % 256).to(torch.uint8).view(torch.int8)
    b = torch.eye(n).to(torch.float8_e4m3fn)
    a_vals, a_meta, b = a_vals.to(DEV), a_meta.to(DEV), b.to(DEV)
    c = _poisoned(256, n)
    _launch(path, a_vals, a_meta, b, c, small=H.SmallConfig(BM=8, BN=16, BK=128))
    ref = sparse_gemm_oracle(a_vals, a_meta, b)
    assert torch.equal(c.cpu().double(), ref), "decoded A differs from the oracle's dense A"


@pytest.mark.parametrize("m", [0, 1, 3, 9, 20, 70])
def test_generic_entry_point(m):
    n, k = 48, 256  # n not a multiple of the tile either
    a_vals, a_meta, b = _inputs(m, n, k, "random", seed=100 + m)
    c = _poisoned(m, n)
    out = sol.sparse_gemm_fp4_fp8(a_vals, a_meta, b, c)
    assert out is c
    if m:
        _check(c, a_vals, a_meta, b)


def test_tma_config_falls_back_when_c_rows_are_unaligned():
    m, n, k = 5, 36, 128  # 36 bf16 = 72-byte rows: no descriptor for c
    a_vals, a_meta, b = _inputs(m, n, k, "random", seed=3)
    c = _poisoned(m, n)
    sol.launch_gemm(a_vals, a_meta, b, c, GEMMS["tma_ws"])
    _check(c, a_vals, a_meta, b)


def test_run_checks_definition_constants():
    a_vals, a_meta, b = _inputs(2, 64, 256)
    with pytest.raises(ValueError, match="b_fp8"):
        sol.run(a_vals, a_meta, b, _poisoned(2, 64))
    with pytest.raises(ValueError, match="a_vals"):
        sol.run(a_vals.tolist(), a_meta, b, _poisoned(2, 64))


def test_bad_inputs_name_the_argument():
    a_vals, a_meta, b = _inputs(4, 32, 128)
    c = _poisoned(4, 32)
    f = sol.sparse_gemm_fp4_fp8
    with pytest.raises(ValueError, match="a_vals"):
        f(a_vals.to(torch.int16), a_meta, b, c)
    with pytest.raises(ValueError, match="a_meta"):
        f(a_vals, a_meta[:, :-1].contiguous(), b, c)
    with pytest.raises(ValueError, match="b_fp8"):
        f(a_vals, a_meta, b.to(torch.bfloat16), c)
    with pytest.raises(ValueError, match="^c:"):
        f(a_vals, a_meta, b, c[:, :16])
    with pytest.raises(ValueError, match="^c:"):
        f(a_vals, a_meta, b, c.float())
    with pytest.raises(ValueError, match="a_vals"):
        f(a_vals.t(), a_meta, b, c)
    with pytest.raises(ValueError, match="b_fp8"):
        f(a_vals[:, :25].contiguous(), a_meta[:, :25].contiguous(), b[:, :100].contiguous(), c)


def test_heuristics_cover_all_m():
    for m in (1, 2, 8, 9, 64, 65, 256, 257, 1024, 4096, 8192, 100000):
        cfg = H.choose(m, 2048, 2048)
        if cfg.path == "fma":
            assert cfg.BM >= m and cfg.BM * cfg.BN * cfg.BK <= 16384
        elif cfg.path == "mma_small":
            assert 2048 % (cfg.split * cfg.BK) == 0 and cfg.acc_k <= cfg.BK
            floats, tickets = cfg.workspace(m, 2048)
            assert floats <= sol.PART_FLOATS and tickets <= sol.TICKETS
        else:
            assert 2048 % cfg.BK == 0 and cfg.acc_k <= cfg.BK
            assert H.gemm_config(m, 2048, 2048, capability=(8, 0)).path == "ptr"
            assert H.gemm_config(m, 2048, 2048, capability=(10, 0)).acc_k == 0
            assert not H.gemm_config(m, 2048, 2048, capability=(10, 0)).f16


def test_mma_small_tickets_reset_and_repeat():
    """Two calls in a row through the split-K path (tiles of a ragged m and n): the tickets
    must come back to 0, so the second call is right too; and the heuristic's generic-k split."""
    m, n, k = 20, 48, 256
    cfg = H.MmaSmallConfig(BW=16, BT=16, BK=32, split=4, acc_k=32)
    for seed in (11, 12):
        a_vals, a_meta, b = _inputs(m, n, k, "random", seed=seed)
        c = _poisoned(m, n)
        sol.launch_mma_small(a_vals, a_meta, b, c, cfg)
        _check(c, a_vals, a_meta, b)
    st = sol._device_state(b)
    assert int(st.tick.abs().sum()) == 0
    assert H.mma_small_config(5, 2048, 96).split == 1  # 96 = 3 * 32: no even split


def test_entry_point_paths_by_m():
    """On Hopper (the default capability here): from F8_FROM_M rows dense e4m3 A and the FP8
    GEMM promoted every ACC_K_HOPPER products (TMA loads from TMA_FROM_M rows, pointer loads
    below; 32-, 64- and 128-wide tiles as m grows); SMALL_M_MAX + 1..F8_FROM_M - 1 rows take
    the e4m3-A path with fp16 widening, fewer the FP32-unit kernel. Run each at reduced n, k
    (ragged m and n; k = 96 gives BK = 32). The fp16-workspace path (no longer chosen) runs
    through an explicit config."""
    f8 = H.F8_FROM_M
    cases = ((H.TMA_FROM_M, 40, 96, "tma", False, H.ACC_K_HOPPER, 128),
             (600, 40, 128, "ptr", False, H.ACC_K_HOPPER, 128), (300, 40, 96, "ptr", False, H.ACC_K_HOPPER, 64),
             (f8 + 3, 40, 128, "ptr", False, H.ACC_K_HOPPER, 32), (f8, 32, 96, "ptr", False, H.ACC_K_HOPPER, 32),
             (f8 - 1, 32, 128, "ptr", False, H.ACC_F16, 32), (37, 40, 96, "ptr", False, H.ACC_F16, 32),
             (H.SMALL_M_MAX + 1, 24, 128, "ptr", False, H.ACC_F16, 32))
    for m, n, k, path, is_f16, acc_k, bn in cases:
        a_vals, a_meta, b = _inputs(m, n, k, "random", seed=7 + m)
        c = _poisoned(m, n)
        cfg = H.choose(m, n, k)
        assert (cfg.path, cfg.f16, cfg.acc_k, cfg.BN) == (path, is_f16, acc_k, bn), (m, cfg)
        sol.sparse_gemm_fp4_fp8(a_vals, a_meta, b, c)
        _check(c, a_vals, a_meta, b)
    for m in range(1, H.SMALL_M_MAX + 1):  # the FP32-unit kernel, one row per BM slot or fewer
        a_vals, a_meta, b = _inputs(m, 24, 128, "random", seed=5 + m)
        c = _poisoned(m, 24)
        assert H.choose(m, 24, 128).path == "fma"
        sol.sparse_gemm_fp4_fp8(a_vals, a_meta, b, c)
        _check(c, a_vals, a_meta, b)
    m, n, k = 150, 40, 128
    a_vals, a_meta, b = _inputs(m, n, k, "random", seed=3)
    c = _poisoned(m, n)
    sol.launch_gemm(a_vals, a_meta, b, c, H.GemmConfig(BM=64, BN=64, BK=64, num_warps=4, num_stages=4,
                                                        acc_k=H.ACC_F16, path="ptr", f16=True))
    _check(c, a_vals, a_meta, b)


def test_f16_decode_writes_exact_operands():
    """decode_f16_kernel alone: the A workspace is the oracle's dense A times 2^-14 and the
    B workspace is b_fp8 in fp16, bit for bit (every vals byte, every meta byte)."""
    m, n, k = 256, 40, 128
    j = torch.arange(k // 4, dtype=torch.int32)
    r = torch.arange(m, dtype=torch.int32)[:, None]
    a_vals = ((r + 7 * j[None, :]) % 256).to(torch.uint8).view(torch.int8).to(DEV)
    a_meta = ((r + 37 * j[None, :]) % 256).to(torch.uint8).view(torch.int8).to(DEV)
    b = torch.randn(n, k).mul(40).clamp(-448, 448).to(torch.float8_e4m3fn).to(DEV)
    a16 = torch.full((m, k), float("nan"), dtype=torch.float16, device=DEV)
    b16 = torch.full((n, k), float("nan"), dtype=torch.float16, device=DEV)
    total = m * k // 4
    n_a = -(-total // H.DECODE16_BLOCK_A)
    grid = (n_a + -(-n * k // H.DECODE16_BLOCK_B),)
    K.decode_f16_kernel[grid](a_vals, a_meta, b.view(torch.int8), a16, b16, total, n * k, n_a,
                              BLOCK_A=H.DECODE16_BLOCK_A, BLOCK_B=H.DECODE16_BLOCK_B)
    eye = torch.eye(k).to(torch.float8_e4m3fn)
    dense = sparse_gemm_oracle(a_vals, a_meta, eye)  # the dense A, float64
    assert torch.equal(a16.cpu().double() * 16384, dense)
    assert torch.equal(b16.cpu(), b.cpu().to(torch.float16))


def test_fast_launch_keys_tma_descriptors():
    """The fast relaunch keys a TMA descriptor by dtype and block shape (hashable), tensors
    by dtype and alignment."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    t = torch.zeros(64, 256, dtype=torch.float8_e4m3fn)
    assert sol._arg_key(TensorDescriptor.from_tensor(t, [64, 128])) == ("desc", torch.float8_e4m3fn, (64, 128))
    assert sol._arg_key(t) == (torch.float8_e4m3fn, True) and sol._arg_key(7) == 7


def test_rebased_descriptor_matches_from_tensor():
    # The plan path rebases its descriptor templates onto each call's tensors (main._rebased).
    from triton.tools.tensor_descriptor import TensorDescriptor
    b1 = torch.empty(64, 128, dtype=torch.float8_e4m3fn)
    b2 = torch.empty(64, 128, dtype=torch.float8_e4m3fn)
    got = sol._rebased(TensorDescriptor.from_tensor(b1, [32, 64]), b2)
    want = TensorDescriptor.from_tensor(b2, [32, 64])
    assert got.base is b2
    assert {k: v for k, v in vars(got).items() if k != "base"} == {k: v for k, v in vars(want).items() if k != "base"}


def test_third_cta_only_where_it_saves_a_wave():
    """The FP8 GEMM runs 3 stages (3 CTAs per SM; TMA capped at 168 registers) only where
    that takes fewer waves of 64x128 tiles on the SMs (round 8); the definition's n = k = 2048
    on 132 SMs: 2048 rows are 512 tiles, two waves either way; 3072 and 8192 rows save one
    and two."""
    def pick(m):
        cfg = H.gemm_config(m, 2048, 2048, (9, 0), 132)
        return cfg.num_stages, cfg.maxnreg, cfg.path
    assert pick(512) == (4, 0, "ptr") and pick(2048) == (4, 0, "ptr")
    assert pick(3072) == (3, 0, "ptr")  # pointer loads take 164 registers: no cap needed
    assert pick(8192) == (3, 168, "tma")
    assert H.gemm_config(8192, 2048, 2048, (9, 0), 1100).num_stages == 4  # one wave either way
