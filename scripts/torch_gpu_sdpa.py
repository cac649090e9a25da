"""PyTorch's scaled_dot_product_attention on the CUDA GPU, f32, for the H200 table.

Run by scripts/h200.sh on the device machine, beside `wgpu-attention bench` on the same
shapes. TF32 is switched off so both sides do full f32 arithmetic. FLOPs are counted as in
`bench`: 4*B*Hq*Lq*Lk*D, and only the unmasked part for causal.
"""
import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

SHAPES = [  # B, Hq, Hkv, Lq, Lk, D, causal
    (4, 32, 32, 4096, 4096, 128, False),
    (4, 32, 32, 4096, 4096, 128, True),
    (1, 8, 8, 1024, 1024, 64, False),
    (1, 32, 8, 1, 4096, 128, False),
]


def flops(b, hq, lq, lk, d, causal):
    if not causal:
        return 4 * b * hq * lq * lk * d
    # top-left alignment: row i sees keys 0..=i
    pairs = sum(min(i + 1, lk) for i in range(lq))
    return 4 * b * hq * pairs * d


print("| shape | kv heads | causal | path | ms | GFLOP/s | GB/s | max err |")
print("|---|---:|---|---|---:|---:|---:|---:|")
for b, hq, hkv, lq, lk, d, causal in SHAPES:
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, hq, lq, d, device="cuda", generator=g)
    k = torch.randn(b, hkv, lk, d, device="cuda", generator=g)
    v = torch.randn(b, hkv, lk, d, device="cuda", generator=g)
    kw = dict(is_causal=causal, enable_gqa=hkv != hq)
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v, **kw)
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        F.scaled_dot_product_attention(q, k, v, **kw)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    ms = sorted(times)[len(times) // 2]
    gf = flops(b, hq, lq, lk, d, causal) / (ms * 1e-3) / 1e9
    gb = 4 * (q.numel() * 2 + k.numel() + v.numel()) / (ms * 1e-3) / 1e9
    c = "top-left" if causal else "none"
    print(f"| {b},{hq},{lq},{lk},{d} | {hkv} | {c} | torch-sdpa-cuda-f32 | {ms:.3f} | {gf:.1f} | {gb:.1f} | - |",
          flush=True)
