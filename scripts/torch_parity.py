#!/usr/bin/env python3
"""Cross-check `wgpu-attention run` against PyTorch's scaled_dot_product_attention.

Developer check (needs torch and numpy; CI has neither): for each case, writes q, k, v (and a
mask) as .npy, computes PyTorch's output, runs the tool through every path, and compares with
atol 1e-4 + rtol 1e-3. Usage: python3 scripts/torch_parity.py [path/to/wgpu-attention]
[--dtype f16|bf16]

With --dtype f16 the inputs are rounded to f16 and written as float16 .npy, the tool runs
with --dtype f16, and each output is held to the rule of tests/suite/f16.rs: its largest error
against PyTorch's f32 result on the rounded inputs is at most twice the largest error of
rounding that result to f16 (what f16 storage on the CPU gives). PyTorch's own f16 SDPA error
is printed beside it for comparison. --dtype bf16 does the same in bfloat16 (inputs and the
output travel as float32 .npy holding bf16 values, as numpy has no bfloat16). The 16-bit runs
add the tensor-core tier (fused-coop), which computes in f16; on lavapipe, with
WGPU_ATTENTION_PLAN_AS=gpu WGPU_ATTENTION_COOP=emulate in the environment, its kernels run
emulated and every path plans as on a GPU (docs/testing.md).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

ARGS = [a for a in sys.argv[1:] if a not in ("--dtype", "f16", "bf16", "f32")]
DTYPE = sys.argv[sys.argv.index("--dtype") + 1] if "--dtype" in sys.argv[1:] else "f32"
F16 = DTYPE in ("f16", "bf16")
HALF = torch.float16 if DTYPE == "f16" else torch.bfloat16
TOOL = ARGS[0] if ARGS else "target/release/wgpu-attention"
# The tensor-core tier (fused-coop) computes in f16, so it is held to the 16-bit rule only:
# with --dtype f16 or bf16 (f32 inputs forced onto it are rounded to f16, which the f32 rule
# does not allow). On an adapter without cooperative matrices it runs where
# WGPU_ATTENTION_COOP=emulate emulates them (with WGPU_ATTENTION_PLAN_AS=gpu, as a GPU
# plans), and is "n/a" otherwise.
PATHS = ["auto", "unfused", "fused-subgroup", "fused-portable", "fused-tiled"] \
    + (["fused-coop"] if F16 else []) + ["decode", "decode-workgroup"]
ATOL, RTOL = 1e-4, 1e-3
g = torch.Generator().manual_seed(0)


def rand(*shape, scale=1.0):
    return torch.randn(*shape, generator=g, dtype=torch.float32) * scale


def bottom_right(lq, lk):
    i = torch.arange(lq)[:, None]
    j = torch.arange(lk)[None, :]
    return j <= i + (lk - lq)


def sdpa(q, k, v, mask=None, causal=None, scale=None):
    """PyTorch SDPA on inputs of any rank (ranks 2 and 3 viewed as 4-D), GQA by enable_gqa,
    broadcasting q, k and v against each other as torch does."""
    r = max(q.dim(), k.dim(), v.dim())
    q4, k4, v4 = (x.reshape((1,) * max(0, 4 - x.dim()) + tuple(x.shape)) for x in (q, k, v))
    lq, lk = q4.shape[-2], k4.shape[-2]
    attn_mask = mask
    is_causal = False
    if causal == "top-left":
        is_causal = mask is None
        if mask is not None:
            tl = torch.ones(lq, lk, dtype=torch.bool).tril()
            attn_mask = tl & mask if mask.dtype == torch.bool else mask.masked_fill(~tl, float("-inf"))
    elif causal == "bottom-right":
        br = bottom_right(lq, lk)
        if mask is None:
            attn_mask = br
        elif mask.dtype == torch.bool:
            attn_mask = br & mask
        else:
            attn_mask = mask.masked_fill(~br, float("-inf"))
    # Heads of 1 broadcast; other differing head counts are grouped-query attention.
    gqa = q4.shape[-3] != k4.shape[-3] and 1 not in (q4.shape[-3], k4.shape[-3])
    out = F.scaled_dot_product_attention(q4, k4, v4, attn_mask=attn_mask, is_causal=is_causal,
                                         scale=scale, enable_gqa=gqa)
    # Ranks below 4 come back without the leading dimensions of 1 added above.
    return out.reshape(tuple(out.shape[max(0, 4 - r):]))


CASES = [
    ("2-D", dict(q=rand(9, 4), k=rand(9, 4), v=rand(9, 4))),
    ("3-D Lq<Lk top-left", dict(q=rand(4, 33, 16), k=rand(4, 70, 16), v=rand(4, 70, 16), causal="top-left")),
    ("3-D Lq>Lk bottom-right", dict(q=rand(2, 70, 16), k=rand(2, 33, 16), v=rand(2, 33, 16), causal="bottom-right")),
    ("4-D GQA bottom-right", dict(q=rand(2, 8, 65, 64), k=rand(2, 2, 129, 64), v=rand(2, 2, 129, 64), causal="bottom-right")),
    ("4-D Dv != D", dict(q=rand(1, 4, 50, 32), k=rand(1, 4, 60, 32), v=rand(1, 4, 60, 48))),
    ("bool mask", dict(q=rand(2, 4, 19, 16), k=rand(2, 4, 37, 16), v=rand(2, 4, 37, 16), mask=torch.rand(2, 1, 19, 37, generator=g) < 0.7)),
    ("float mask -inf", dict(q=rand(1, 3, 29, 12), k=rand(1, 3, 41, 12), v=rand(1, 3, 41, 12),
                             mask=rand(29, 41).masked_fill(torch.rand(29, 41, generator=g) < 0.2, float("-inf")))),
    ("mask + causal", dict(q=rand(1, 2, 40, 16), k=rand(1, 2, 40, 16), v=rand(1, 2, 40, 16),
                           mask=torch.rand(40, 40, generator=g) < 0.8, causal="top-left")),
    ("large logits x50", dict(q=rand(1, 2, 64, 64, scale=50), k=rand(1, 2, 64, 64, scale=50), v=rand(1, 2, 64, 64))),
    ("custom scale", dict(q=rand(1, 2, 30, 16), k=rand(1, 2, 30, 16), v=rand(1, 2, 30, 16), scale=0.7)),
    # Not with is_causal: torch 2.15's CPU kernel returns NaN for is_causal with a negative
    # scale (an explicit tril mask gives the right answer).
    ("negative scale", dict(q=rand(1, 2, 30, 16), k=rand(1, 2, 30, 16), v=rand(1, 2, 30, 16), scale=-0.7,
                            mask=torch.rand(30, 30, generator=g) < 0.8)),
    ("scale 0", dict(q=rand(2, 20, 8), k=rand(2, 25, 8), v=rand(2, 25, 8), scale=0.0, causal="bottom-right")),
    ("long rows", dict(q=rand(1, 2, 8, 64), k=rand(1, 2, 5000, 64), v=rand(1, 2, 5000, 64))),
    ("decode GQA", dict(q=rand(1, 32, 1, 128), k=rand(1, 8, 4096, 128), v=rand(1, 8, 4096, 128), causal="bottom-right")),
    ("decode Lq 4", dict(q=rand(2, 8, 4, 64), k=rand(2, 2, 700, 64), v=rand(2, 2, 700, 64), causal="bottom-right")),
    ("D 63 (padded)", dict(q=rand(2, 3, 33, 63), k=rand(2, 3, 45, 63), v=rand(2, 3, 45, 63), causal="bottom-right")),
    ("D 5 Dv 7 (padded)", dict(q=rand(1, 2, 17, 5), k=rand(1, 2, 23, 5), v=rand(1, 2, 23, 7), causal="top-left")),
    ("5-D", dict(q=rand(2, 3, 2, 9, 8), k=rand(2, 3, 2, 11, 8), v=rand(2, 3, 2, 11, 8), causal="top-left")),
    ("5-D GQA, mask over 1 of 2 batch dims", dict(q=rand(2, 3, 4, 13, 16), k=rand(2, 3, 2, 21, 16), v=rand(2, 3, 2, 21, 12),
                                                  mask=torch.rand(2, 1, 4, 13, 21, generator=g) < 0.7, causal="bottom-right")),
    ("6-D float mask (Lq, Lk)", dict(q=rand(2, 1, 2, 3, 10, 8), k=rand(2, 1, 2, 3, 17, 8), v=rand(2, 1, 2, 3, 17, 8),
                                     mask=rand(10, 17))),
    ("2-D transposed k, v (Fortran-order .npy)", dict(q=rand(20, 16), k=rand(16, 30).T, v=rand(8, 30).T)),
    ("D 160 (above 128)", dict(q=rand(1, 2, 40, 160), k=rand(1, 2, 50, 160), v=rand(1, 2, 50, 160))),
    ("decode D 256 GQA (Gemma-like)", dict(q=rand(1, 16, 1, 256), k=rand(1, 8, 3000, 256), v=rand(1, 8, 3000, 256),
                                           causal="bottom-right")),
    # Above 256: only decode's workgroup form and the unfused path take these widths.
    ("decode D 576 Dv 512 (MLA-like)", dict(q=rand(1, 16, 1, 576), k=rand(1, 1, 2000, 576), v=rand(1, 1, 2000, 512),
                                            causal="bottom-right")),
    ("D 320 Dv 1000, mask", dict(q=rand(2, 2, 7, 320), k=rand(2, 2, 90, 320), v=rand(2, 2, 90, 1000),
                                 mask=torch.rand(7, 90, generator=g) < 0.6, causal="top-left")),
    # Past fused-portable's llvmpipe loop limit at D 64 (11 816 keys): refused there, not wrong.
    ("long rows Lk 20000", dict(q=rand(1, 2, 24, 64), k=rand(1, 2, 20000, 64), v=rand(1, 2, 20000, 64))),
    # q, k and v broadcast against each other (torch broadcasts every dimension but the last two).
    ("broadcast: k, v of batch 1", dict(q=rand(3, 4, 9, 16), k=rand(1, 4, 20, 16), v=rand(1, 4, 20, 16), causal="bottom-right")),
    ("broadcast: 3-D q, 4-D k v", dict(q=rand(2, 9, 16), k=rand(3, 2, 20, 16), v=rand(3, 2, 20, 12))),
    ("broadcast: q of one head", dict(q=rand(2, 1, 9, 16), k=rand(2, 4, 20, 16), v=rand(2, 4, 20, 16),
                                      mask=torch.rand(9, 20, generator=g) < 0.7)),
    # Zero-size dimensions, which torch accepts.
    ("Lk 0", dict(q=rand(1, 4, 5, 8), k=rand(1, 2, 0, 8), v=rand(1, 2, 0, 8))),
    ("Lq 0", dict(q=rand(2, 4, 0, 8), k=rand(2, 4, 7, 8), v=rand(2, 4, 7, 8), causal="top-left")),
    ("batch 0", dict(q=rand(0, 2, 5, 8), k=rand(0, 2, 7, 8), v=rand(0, 2, 7, 8))),
    ("D 0 bool mask", dict(q=rand(1, 2, 5, 0), k=rand(1, 2, 7, 0), v=rand(1, 2, 7, 6),
                           mask=torch.rand(5, 7, generator=g) < 0.7)),
    ("Dv 0", dict(q=rand(1, 2, 5, 8), k=rand(1, 2, 7, 8), v=rand(1, 2, 7, 0), causal="bottom-right")),
    # Last, so that the cases above keep their random data (they share one generator).
    # Hugging Face's form: 0 and finfo.min, causal and left padding in one mask; batch 1's
    # first 3 query rows see no key (finfo.min throughout: torch gives them uniform weights).
    ("finfo.min mask, left padding", dict(q=rand(2, 4, 12, 16), k=rand(2, 4, 12, 16), v=rand(2, 4, 12, 16),
                                          mask=torch.zeros(2, 1, 12, 12).masked_fill(
                                              ~(torch.ones(12, 12, dtype=torch.bool).tril()
                                                & (torch.arange(12) >= torch.tensor([0, 3])[:, None])[:, None, None, :]),
                                              torch.finfo(torch.float32).min))),
]


def main():
    failures = 0
    not_applicable = 0
    with tempfile.TemporaryDirectory() as d:
        for name, c in CASES:
            if F16:
                # Inputs as f16 holds them (values beyond its range would be refused).
                c = dict(c, **{key: c[key].to(HALF).float() for key in ("q", "k", "v")})
            expected = sdpa(c["q"], c["k"], c["v"], c.get("mask"), c.get("causal"), c.get("scale")).numpy()
            if F16:
                rounded = torch.from_numpy(expected).to(HALF).float().numpy()
                cpu_f16 = np.abs(rounded - expected).max(initial=0.0)
                torch_f16 = sdpa(*(c[key].to(HALF) for key in ("q", "k", "v")), c.get("mask"),
                                 c.get("causal"), c.get("scale")).float().numpy()
                torch_err = np.abs(torch_f16 - expected).max(initial=0.0)
            files = {}
            for key in ("q", "k", "v", "mask"):
                if key in c:
                    files[key] = os.path.join(d, key + ".npy")
                    data = c[key].numpy()
                    half_file = DTYPE == "f16" and key != "mask"
                    np.save(files[key], data.astype(np.float16) if half_file else data)
            for path in PATHS:
                out = os.path.join(d, "out.npy")
                if os.path.exists(out):
                    os.remove(out)
                cmd = [TOOL, "run", "--path", path, "--out", out]
                if F16:
                    cmd += ["--dtype", DTYPE]
                for key, f in files.items():
                    cmd += ["--" + key, f]
                if c.get("causal"):
                    cmd += ["--causal", c["causal"]]
                if c.get("scale") is not None:
                    cmd += ["--scale", str(c["scale"])]
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "?"
                    status = "n/a (%s)" % msg if "cannot run" in msg else "ERROR %d: %s" % (r.returncode, msg)
                    failures += status.startswith("ERROR")
                    not_applicable += status.startswith("n/a")
                    print("%-24s %-15s %s" % (name, path, status))
                    continue
                got = np.load(out).astype(np.float32)
                err = np.abs(got - expected)
                if F16:
                    ok = got.shape == expected.shape and err.max(initial=0.0) <= 2 * cpu_f16 + 1e-7
                    failures += not ok
                    print("%-24s %-15s max abs err %.2e (%s storage on the CPU %.2e, torch %s %.2e)  %s"
                          % (name, path, err.max(initial=0.0), DTYPE, cpu_f16, DTYPE, torch_err,
                             "ok" if ok else "FAILED"))
                    continue
                # "allow": a case's own allowance (scripts/torch_fuzz.py), for ill-conditioned
                # problems where any f32 result, torch's included, misses the f64 answer by more.
                tol = np.maximum(ATOL + RTOL * np.abs(expected), c.get("allow", 0.0))
                ok = got.shape == expected.shape and bool(np.all(err <= tol))
                failures += not ok
                print("%-24s %-15s max abs err %.2e  %s" % (name, path, err.max(initial=0.0), "ok" if ok else "FAILED"))
    passed = len(CASES) * len(PATHS) - failures - not_applicable
    print("%d passed, %d failed, %d not applicable" % (passed, failures, not_applicable))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
