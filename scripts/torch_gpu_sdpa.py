"""PyTorch's scaled_dot_product_attention on the CUDA GPU in f32, f16 and bf16, for the H200
table, with PyTorch's own error against f64 on the same (rounded) inputs.

Run by scripts/h200.sh on the device machine, beside `wgpu-attention bench` on the same
shapes (the cooperative-matrix tier's targets, issue 6). TF32 is switched off so f32 is full
f32 arithmetic. FLOPs are counted as in `bench`: 4*B*Hq*Lq*Lk*D, and only the unmasked part
for causal. "max err" is PyTorch's error against SDPA in f64 on the first batch and kv
group (the inputs rounded to the dtype first): the yardstick for the tier's accuracy rule
(at most about twice PyTorch's own f16 error).

Where torch has no CUDA device (a rehearsal of the device script on a machine without one),
it runs on the CPU, timed by the wall clock, its rows labelled torch-sdpa-cpu-*, and
TORCH_SDPA_SHAPES names smaller shapes, "B,Hq,Hkv,Lq,Lk,D causal" entries (causal none or
top-left) separated by ";".
"""
import os
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

SHAPES = [  # B, Hq, Hkv, Lq, Lk, D, causal
    (4, 32, 32, 4096, 4096, 128, False),
    (4, 32, 32, 4096, 4096, 128, True),
    (1, 32, 8, 4096, 4096, 128, True),
    (1, 8, 8, 1024, 1024, 64, False),
    (1, 8, 8, 1024, 1024, 64, True),
    (2, 16, 16, 2048, 2048, 256, False),
    (1, 32, 8, 1, 4096, 128, False),
    (8, 32, 8, 1, 8192, 128, False),
    (1, 32, 8, 1, 32768, 128, False),
]
if os.environ.get("TORCH_SDPA_SHAPES"):
    SHAPES = [tuple(int(x) for x in dims.split(",")) + (causal == "top-left",)
              for dims, causal in (e.split() for e in os.environ["TORCH_SDPA_SHAPES"].split(";"))]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def time_ms(call):
    """One call's time in ms: CUDA events on the GPU, the wall clock on the CPU."""
    if DEV == "cpu":
        start = time.perf_counter()
        call()
        return (time.perf_counter() - start) * 1e3
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    call()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e)


def flops(b, hq, lq, lk, d, causal):
    if not causal:
        return 4 * b * hq * lq * lk * d
    # top-left alignment: row i sees keys 0..=i
    pairs = sum(min(i + 1, lk) for i in range(lq))
    return 4 * b * hq * pairs * d


def error_vs_f64(q, k, v, kw):
    """PyTorch's error in this dtype against f64 on the first batch and kv group."""
    group = q.shape[1] // k.shape[1]
    qs, ks, vs = q[:1, :group], k[:1, :1], v[:1, :1]
    got = F.scaled_dot_product_attention(qs, ks, vs, **kw).double()
    exact = F.scaled_dot_product_attention(qs.double(), ks.double(), vs.double(), **kw)
    return (got - exact).abs().max().item()


print("| shape | kv heads | causal | path | ms | GFLOP/s | GB/s | max err |")
print("|---|---:|---|---|---:|---:|---:|---:|")
for b, hq, hkv, lq, lk, d, causal in SHAPES:
    for name, dtype in DTYPES.items():
        g = torch.Generator(device=DEV).manual_seed(0)
        q = torch.randn(b, hq, lq, d, device=DEV, generator=g).to(dtype)
        k = torch.randn(b, hkv, lk, d, device=DEV, generator=g).to(dtype)
        v = torch.randn(b, hkv, lk, d, device=DEV, generator=g).to(dtype)
        kw = dict(is_causal=causal, enable_gqa=hkv != hq)
        for _ in range(5):
            F.scaled_dot_product_attention(q, k, v, **kw)
        times = sorted(time_ms(lambda: F.scaled_dot_product_attention(q, k, v, **kw))
                       for _ in range(20))
        ms = times[len(times) // 2]
        gf = flops(b, hq, lq, lk, d, causal) / (ms * 1e-3) / 1e9
        gb = q.element_size() * (q.numel() * 2 + k.numel() + v.numel()) / (ms * 1e-3) / 1e9
        err = error_vs_f64(q, k, v, kw)
        c = "top-left" if causal else "none"
        print(f"| {b},{hq},{lq},{lk},{d} | {hkv} | {c} | torch-sdpa-{DEV}-{name} | {ms:.3f} "
              f"| {gf:.1f} | {gb:.1f} | {err:.1e} |", flush=True)
