#!/usr/bin/env python3
"""GPU-sized f16 problems through `wgpu-attention run --dtype f16 --path auto`, each held
against SDPA in f64 on the same f16 inputs beside PyTorch's own f16 error: the flow of
issue 36's hidden cases (float16 .npy in, float16 .npy out), rehearsed on the device.

Usage: python3 scripts/torch_run_f16.py [path/to/wgpu-attention]. Run by scripts/h200.sh
(parts all, tests, run, and coop unless H200_COOP_RUN=0) on the device, which has torch with
CUDA. Prints one table row a case: the path the tool ran (its stderr's "ran on" line), its
largest error against f64, PyTorch's f16 SDPA error on the same inputs, their ratio, and
"ok" where the tool's error is at most twice PyTorch's (the issue's rule), "OVER" elsewhere;
then "N passed, N failed".

Errors are measured on the first batch and the first kv head's group of query heads (as
scripts/torch_gpu_sdpa.py does), so that the f64 reference of a 4x32x4096x4096 problem
fits. Without torch (a local check on lavapipe, with numpy alone) the reference is numpy's
f64 and the yardstick the same attention on the f16 inputs in f32 with its output rounded
to f16, labelled "numpy-f16"; H200_RUN_CASES then names smaller cases, one
"B,Hq,Hkv,Lq,Lk,D,Dv causal mask" a line (causal none|top-left|bottom-right, mask
none|padding|bool).
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the local check: numpy alone
    torch = None

TOOL = sys.argv[1] if len(sys.argv) > 1 else "target/release/wgpu-attention"
# The target shapes of issue 36 and shapes that are not tile multiples, with GQA, both
# causal alignments, masks, Dv != D and a head of 256: B,Hq,Hkv,Lq,Lk,D,Dv causal mask.
CASES = os.environ.get("H200_RUN_CASES") or """4,32,32,4096,4096,128,128 none none
1,32,8,4096,4096,128,128 bottom-right none
1,8,8,1024,1024,64,64 none padding
2,16,4,777,1500,128,128 bottom-right bool
1,8,2,513,700,96,64 top-left none
2,16,16,2048,2048,256,256 none none
1,32,8,1,4096,128,128 bottom-right none"""


def parse(line):
    dims, causal, mask = line.split()
    return [int(x) for x in dims.split(",")], causal, mask


def allowed(b, lq, lk, causal, mask, rng):
    """The keys each row may see, (B, 1, Lq, Lk) bool, and the mask the tool reads (or
    None): a padding mask (B, 1, 1, Lk) keeps a random length of each batch's keys, a bool
    mask (Lq, Lk) a random three quarters, with row 3 fully masked."""
    keep = np.ones((b, 1, lq, lk), dtype=bool)
    tool_mask = None
    if mask == "padding":
        lengths = rng.integers(lk // 2, lk + 1, size=b)
        tool_mask = (np.arange(lk)[None, :] < lengths[:, None]).reshape(b, 1, 1, lk)
        keep &= tool_mask
    elif mask == "bool":
        tool_mask = rng.random((lq, lk)) < 0.75
        if lq > 3:
            tool_mask[3] = False
        keep &= tool_mask[None, None]
    i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
    if causal == "top-left":
        keep &= (j <= i)[None, None]
    elif causal == "bottom-right":
        keep &= (j <= i + (lk - lq))[None, None]
    return keep, tool_mask


def attention_np(q, k, v, keep, dtype):
    """Attention in numpy in `dtype` over one batch's group, rows with no key zeros."""
    s = np.einsum("hqd,kd->hqk", q.astype(dtype), k.astype(dtype)) / np.sqrt(q.shape[-1])
    s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    out = np.einsum("hqk,kd->hqd", p, v.astype(dtype)) / np.where(l > 0, l, 1)
    return np.where(l > 0, out, 0)


def errors(q, k, v, keep, got, plain):
    """The tool's error and the yardstick's on the first batch's first kv group; `plain`:
    "none" or "top-left" where no mask is given, which PyTorch then runs as it would for
    a user (its flash kernel), else the mask of allowed keys."""
    group = q.shape[1] // k.shape[1]
    qs, ks, vs, keep0 = q[0, :group], k[0, 0], v[0, 0], keep[0]
    ours = got[0, :group].astype(np.float64)
    if torch is None:
        exact = attention_np(qs, ks, vs, keep0, np.float64)
        yard = attention_np(qs, ks, vs, keep0, np.float32).astype(np.float16)
        yard_err = np.abs(yard.astype(np.float64) - exact).max()
        return np.abs(ours - exact).max(), yard_err, "numpy-f16"
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev)
    qt, kt, vt = t(qs)[None], t(ks)[None, None], t(vs)[None, None]
    m = t(keep0)[None]
    kw = dict(attn_mask=m, enable_gqa=True)
    if plain:
        kw = dict(is_causal=plain == "top-left", enable_gqa=True)
    exact = F.scaled_dot_product_attention(qt.double(), kt.double(), vt.double(), **kw)
    half = F.scaled_dot_product_attention(qt, kt, vt, **kw).double()
    # Rows with no key: SDPA gives NaN there, the contract zeros.
    empty = ~m.any(dim=-1, keepdim=True)
    exact = torch.where(empty, 0.0, exact)
    half = torch.where(empty, 0.0, half)
    ours_t = torch.from_numpy(ours).to(dev)[None]
    return ((ours_t - exact).abs().max().item(), (half - exact).abs().max().item(), "torch-f16")


def main():
    rng = np.random.default_rng(0)
    passed = failed = 0
    print("| case (B,Hq,Hkv,Lq,Lk,D,Dv causal mask) | path (run --dtype f16 --path auto) "
          "| max err vs f64 | f16 yardstick | ratio | |")
    print("|---|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for line in CASES.strip().splitlines():
            (b, hq, hkv, lq, lk, d, dv), causal, mask = parse(line)
            q = rng.standard_normal((b, hq, lq, d), dtype=np.float32).astype(np.float16)
            k = rng.standard_normal((b, hkv, lk, d), dtype=np.float32).astype(np.float16)
            v = rng.standard_normal((b, hkv, lk, dv), dtype=np.float32).astype(np.float16)
            keep, tool_mask = allowed(b, lq, lk, causal, mask, rng)
            files = {n: os.path.join(tmp, n + ".npy") for n in ("q", "k", "v", "mask", "out")}
            for n, a in (("q", q), ("k", k), ("v", v)):
                np.save(files[n], a)
            cmd = [TOOL, "run", "--q", files["q"], "--k", files["k"], "--v", files["v"],
                   "--dtype", "f16", "--path", "auto", "--out", files["out"]]
            if causal != "none":
                cmd += ["--causal", causal]
            if tool_mask is not None:
                np.save(files["mask"], tool_mask)
                cmd += ["--mask", files["mask"]]
            ran = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            said = re.search(r"path (\S+) \((.*)\), \d+ chunk", ran.stderr)
            path = said.group(1) if said else "?"
            if ran.returncode != 0:
                failed += 1
                why = ran.stderr.strip().splitlines()[-1:] or ["no output"]
                print(f"| {line} | {path} | exit {ran.returncode}: {why[0]} | | | FAILED |",
                      flush=True)
                continue
            got = np.load(files["out"])
            square = causal == "bottom-right" and lq == lk
            plain = mask == "none" and ("top-left" if square else causal)
            plain = plain if plain in ("none", "top-left") else None
            ours, yard, name = errors(q, k, v, keep, got, plain)
            ratio = ours / yard if yard > 0 else float("inf")
            ok = ours <= 2 * yard
            passed += ok
            failed += not ok
            print(f"| {line} | {path} | {ours:.2e} | {name} {yard:.2e} | {ratio:.2f} "
                  f"| {'ok' if ok else 'OVER'} |", flush=True)
    print(f"\nrun --dtype f16 --path auto: {passed} passed, {failed} failed")


main()
