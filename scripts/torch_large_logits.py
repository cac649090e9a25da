#!/usr/bin/env python3
"""How far each path lands from the f64 answer where logits are large, beside PyTorch's f32.

Developer check (needs torch and numpy): draws q and k of shape (1, 2, 64, 64) scaled by 50,
12 and 6 in turn (logits with standard deviations of about 2500, 144 and 36) and v unscaled,
and prints, per draw, the largest error against PyTorch's f64 result of PyTorch's f32
result and of each build's output through each path, marking FAIL where an output misses
PyTorch's f32 result by more than atol 1e-4 + rtol 1e-3 (scripts/torch_parity.py's rule).
Builds to compare are given as NAME=PATH (default: new=target/release/wgpu-attention).

Usage: python3 scripts/torch_large_logits.py FIRST_SEED END_SEED [NAME=PATH ...]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

PATHS = ["unfused", "fused-subgroup", "fused-portable", "fused-tiled"]
AMPLITUDES = [50.0, 12.0, 6.0]


def main():
    first, end = int(sys.argv[1]), int(sys.argv[2])
    tools = dict(a.split("=", 1) for a in sys.argv[3:]) or {"new": "target/release/wgpu-attention"}
    with tempfile.TemporaryDirectory() as d:
        files = {n: os.path.join(d, n + ".npy") for n in ("q", "k", "v", "out")}
        for seed in range(first, end):
            g = torch.Generator().manual_seed(seed)
            amp = AMPLITUDES[seed % len(AMPLITUDES)]
            q = torch.randn(1, 2, 64, 64, generator=g) * amp
            k = torch.randn(1, 2, 64, 64, generator=g) * amp
            v = torch.randn(1, 2, 64, 64, generator=g)
            f32 = F.scaled_dot_product_attention(q, k, v).numpy()
            f64 = F.scaled_dot_product_attention(q.double(), k.double(), v.double()).numpy()
            for n, x in (("q", q), ("k", k), ("v", v)):
                np.save(files[n], x.numpy())
            line = "seed %d x%g: torch f32 %.1e |" % (seed, amp, np.abs(f32 - f64).max())
            for path in PATHS:
                for name, tool in tools.items():
                    subprocess.run([tool, "run", "--path", path, "--q", files["q"], "--k", files["k"],
                                    "--v", files["v"], "--out", files["out"]], check=True, capture_output=True)
                    out = np.load(files["out"])
                    ok = np.all(np.abs(out - f32) <= 1e-4 + 1e-3 * np.abs(f32))
                    line += " %s %s %.1e%s |" % (path, name, np.abs(out - f64).max(), "" if ok else " FAIL")
            print(line, flush=True)


if __name__ == "__main__":
    main()
