#!/usr/bin/env python3
"""Kv heads longer than one storage binding, through the tool, against PyTorch in f64.

Developer check (needs torch and numpy; about 1 GB of host memory and a minute on
lavapipe): two problems whose K of one kv head exceeds lavapipe's 128 MiB storage binding,
so that the library runs their keys in segments (README "Limits"): a GQA prefill of 3 rows
over 270 000 keys at D 128 (bottom-right causal), and a decode over 530 000 keys at D 64.
Each goes through `wgpu-attention run` (auto) and is compared with PyTorch's
scaled_dot_product_attention on the same values in f64; it fails past atol 1e-4 + rtol
1e-3 (scripts/torch_parity.py's rule) or where the plan does not say "segments".

Usage: python3 scripts/torch_long_kv.py [path/to/wgpu-attention]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

TOOL = sys.argv[1] if len(sys.argv) > 1 else "target/release/wgpu-attention"
CASES = [
    # q shape, k/v shape, causal
    ((1, 4, 3, 128), (1, 1, 270000, 128), "bottom-right"),
    ((1, 2, 1, 64), (1, 2, 530000, 64), "none"),
]


def main():
    g = torch.Generator().manual_seed(5)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for q_shape, kv_shape, causal in CASES:
            q = torch.randn(*q_shape, generator=g)
            k = torch.randn(*kv_shape, generator=g)
            v = torch.randn(*kv_shape, generator=g)
            paths = {n: os.path.join(tmp, f"{n}.npy") for n in ("q", "k", "v", "out")}
            for n, t in (("q", q), ("k", k), ("v", v)):
                np.save(paths[n], t.numpy())
            run = subprocess.run(
                [TOOL, "run", "--q", paths["q"], "--k", paths["k"], "--v", paths["v"],
                 "--out", paths["out"], "--causal", causal],
                capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{q_shape} {kv_shape}: FAIL, the tool said: {run.stderr.strip()}")
                failed += 1
                continue
            group = q_shape[1] // kv_shape[1]
            kk = k.double().repeat_interleave(group, dim=1)
            vv = v.double().repeat_interleave(group, dim=1)
            mask = None
            if causal == "bottom-right":
                lq, lk = q_shape[2], kv_shape[2]
                mask = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq)
            want = F.scaled_dot_product_attention(q.double(), kk, vv, attn_mask=mask)
            got = torch.from_numpy(np.load(paths["out"])).double()
            err = (got - want).abs()
            ok = bool((err <= 1e-4 + 1e-3 * want.abs()).all()) and "segments" in run.stderr
            failed += not ok
            print(f"{q_shape} over {kv_shape} causal {causal}: max abs err {err.max().item():.2e} "
                  f"{'ok' if ok else 'FAIL'}\n  {run.stderr.strip()}")
    print(f"{len(CASES) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
