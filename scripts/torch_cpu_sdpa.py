#!/usr/bin/env python3
"""`wgpu-attention bench` and PyTorch's CPU scaled_dot_product_attention, side by side.

Developer check (needs torch; CI has none). Runs the tool's benchmark for the given shape
(every path it names, checked against the reference before timing), then times PyTorch's
SDPA on the same shape in the same process tree, and prints one table. FLOPs are counted as
in `bench`: 4*B*Hq*Lq*Lk*D, only the unmasked part for causal. The max err column is each
row's largest difference from the same problem computed in f64: for the tool's rows on the
rows `bench` checks, for torch's row on every row, against torch's own f64 result.

With --dtype f16 the tool's rows are its f16 rows (`bench --dtype f16`: K and V in an f16
KvCache on the device) and torch runs on float16 tensors; the error is then against f64 on
the f16-rounded inputs.

With --mask padding|finfo-padding|bool|bias|window both get a mask of that kind (`bench
--mask`; torch's of the same form and density, its own random values): a bool (B, 1, 1, Lk)
mask hiding the last eighth of the keys (finfo-padding: the same as a float mask of 0 and
torch.finfo(float32).min, Hugging Face's form), a bool (Lq, Lk) mask hiding 10 % at random, a float (Lq, Lk) bias, or
a bool (Lq, Lk) sliding window of 256 keys.

Usage: python3 scripts/torch_cpu_sdpa.py [--shape B,H,Lq,Lk,D] [--kv-heads N]
           [--causal top-left] [--path auto,cpu-ndarray] [--reps 10] [--tool PATH]
           [--dtype f32|f16] [--mask padding|finfo-padding|bool|bias|window]
"""
import argparse
import json
import subprocess
import time

import torch
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--shape", default="1,8,1024,1024,64")
ap.add_argument("--kv-heads", type=int)
ap.add_argument("--causal", choices=["top-left"])
ap.add_argument("--path", default="auto,cpu-ndarray")
ap.add_argument("--reps", type=int, default=10)
ap.add_argument("--tool", default="target/release/wgpu-attention")
ap.add_argument("--dtype", choices=["f32", "f16"], default="f32")
ap.add_argument("--mask", choices=["padding", "finfo-padding", "bool", "bias", "window"])
a = ap.parse_args()
b, hq, lq, lk, d = (int(x) for x in a.shape.split(","))
hkv = a.kv_heads or hq

cmd = [a.tool, "bench", "--shape", a.shape, "--kv-heads", str(hkv), "--path", a.path,
       "--reps", str(a.reps), "--json"]
if a.causal:
    cmd += ["--causal", a.causal]
if a.dtype == "f16":
    cmd += ["--dtype", "f16"]
if a.mask:
    cmd += ["--mask", a.mask]
rows = [json.loads(line) for line in subprocess.run(cmd, check=True, capture_output=True,
                                                    text=True).stdout.splitlines()
        if line.startswith("{")]

pairs = sum(min(i + 1, lk) for i in range(lq)) if a.causal else lq * lk
flops = 4 * b * hq * pairs * d
g = torch.Generator().manual_seed(0)
q = torch.randn(b, hq, lq, d, generator=g)
k = torch.randn(b, hkv, lk, d, generator=g)
v = torch.randn(b, hkv, lk, d, generator=g)
if a.dtype == "f16":
    q, k, v = q.half(), k.half(), v.half()
kw = dict(is_causal=bool(a.causal), enable_gqa=hkv != hq)
if a.mask:
    if a.mask in ("padding", "finfo-padding"):
        mask = (torch.arange(lk) < lk - lk // 8).reshape(1, 1, 1, lk).expand(b, 1, 1, lk)
        if a.mask == "finfo-padding":
            mask = torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask, torch.finfo(q.dtype).min)
    elif a.mask == "window":
        i = torch.arange(lq)[:, None] + (lk - lq)
        j = torch.arange(lk)[None, :]
        mask = (j <= i) & (j > i - 256)
    elif a.mask == "bool":
        mask = torch.rand(lq, lk, generator=g) < 0.9
    else:
        mask = torch.randn(lq, lk, generator=g).to(q.dtype)
    if a.causal:
        # torch takes no attn_mask with is_causal: the causal rule joins the mask.
        tl = torch.ones(lq, lk, dtype=torch.bool).tril()
        mask = tl & mask if mask.dtype == torch.bool else mask.masked_fill(~tl, float("-inf"))
    kw = dict(attn_mask=mask, enable_gqa=hkv != hq)
for _ in range(3):
    F.scaled_dot_product_attention(q, k, v, **kw)
times = []
for _ in range(a.reps):
    t = time.perf_counter()
    F.scaled_dot_product_attention(q, k, v, **kw)
    times.append((time.perf_counter() - t) * 1e3)
ms = sorted(times)[len(times) // 2]
# torch's own error, measured like the tool's rows: against the same computation in f64.
out = F.scaled_dot_product_attention(q, k, v, **kw)
exact_kw = dict(kw)
if a.mask in ("bias", "finfo-padding"):
    exact_kw["attn_mask"] = kw["attn_mask"].double()  # a float mask of the query's dtype
exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), **exact_kw)
err = (out.double() - exact).abs().max().item()
dtype = " f16" if a.dtype == "f16" else ""
rows.append({"path": f"torch-sdpa-cpu{dtype} ({torch.get_num_threads()} threads)", "ms": ms,
             "wall_ms": ms, "gflops": flops / ms / 1e6, "max_abs_err": err})

print(f"B{b} Hq{hq} Hkv{hkv} Lq{lq} Lk{lk} D{d} causal {a.causal or 'none'} "
      f"mask {a.mask or 'none'}; "
      f"adapter: {rows[0].get('adapter', '?')}")
# ms: the tool's GPU timestamps where the adapter has them (its kernels' time), torch's wall
# clock; wall ms: both as the caller sees them (the tool's submit and wait included).
print("| path | ms | wall ms | GFLOP/s | max err |\n|---|---:|---:|---:|---:|")
for r in rows:
    wall = r.get("wall_ms") or r["ms"]
    if r["path"] == "copy":
        # The decode bandwidth baseline: no FLOPs, no reference.
        print(f"| copy kernel, same bytes as K and V | {r['ms']:.1f} | {wall:.1f} | | |")
        continue
    err = "NaN" if r["max_abs_err"] is None else f"{r['max_abs_err']:.1e}"  # null: NaN
    print(f"| {r['path']} | {r['ms']:.1f} | {wall:.1f} | {r['gflops']:.2f} | {err} |")
