#!/usr/bin/env python3
"""Random cases against PyTorch's scaled_dot_product_attention, through every path.

Developer check beside scripts/torch_parity.py (needs torch and numpy; CI has neither):
draws N random problems (ranks 2-5, batches, GQA, Lq from 1 to 100 and Lk from 1 to 1000,
widths that are and are not multiples of 4 or above 128, bool, float and broadcast masks,
both causal alignments, custom scales, large logits) and runs them through torch_parity's
comparison, against torch's result in f64; cases with large logits get the allowance the
Rust tests give them (see allowance()). The widths come from a short list so that lavapipe
compiles few new pipelines.
Usage: python3 scripts/torch_fuzz.py [N] [SEED] [path/to/wgpu-attention] [--dtype f16|bf16]
       (TORCH_FUZZ_LK=a,b,c: the key lengths to draw from instead of 1 .. 1000;
        TORCH_FUZZ_WIDTHS=a,b,c: the widths, D and Dv, to draw from;
        --dtype: the inputs rounded to f16 or bf16 and held to torch_parity's 16-bit rule,
        the large-logit allowance then unused)
"""
import os
import random
import sys

import torch

# --dtype X passes on to torch_parity (which reads it from sys.argv when imported).
DTYPE_ARGS = sys.argv[sys.argv.index("--dtype"):sys.argv.index("--dtype") + 2] if "--dtype" in sys.argv else []
POSITIONAL = [a for a in sys.argv[1:] if a not in DTYPE_ARGS]
N = int(POSITIONAL[0]) if len(POSITIONAL) > 0 else 40
SEED = int(POSITIONAL[1]) if len(POSITIONAL) > 1 else 5
TOOL = POSITIONAL[2] if len(POSITIONAL) > 2 else "target/release/wgpu-attention"
sys.argv = sys.argv[:1] + DTYPE_ARGS
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_parity as tp  # noqa: E402

tp.TOOL = TOOL
rnd = random.Random(SEED)
g = torch.Generator().manual_seed(SEED)
# Widths to draw from; TORCH_FUZZ_WIDTHS=300,520,1000 (say) draws widths above 256 instead,
# which only decode's workgroup form and the unfused path take.
WIDTHS = [int(x) for x in os.environ.get("TORCH_FUZZ_WIDTHS", "8,16,32,64,128,5,63,160").split(",")]
# Key lengths to draw from; TORCH_FUZZ_LK=1100,2100,4099 (say) draws long rows instead, where
# the subgroup tier splits the keys into ranges side by side for few query rows.
LK_CHOICES = [int(x) for x in os.environ.get("TORCH_FUZZ_LK", "1,5,16,64,257,300,1000").split(",")]


def case():
    rank = rnd.choice([2, 3, 4, 4, 4, 5])
    hkv = rnd.choice([1, 2, 3])
    hq = hkv * rnd.choice([1, 2, 4])
    b = rnd.choice([1, 2])
    lq = rnd.choice([1, 2, 7, 16, 33, 64, 100])
    lk = rnd.choice(LK_CHOICES)
    d = rnd.choice(WIDTHS)
    dv = d if rnd.random() < 0.7 else rnd.choice(WIDTHS)
    lead = {2: [], 3: [hq], 4: [b, hq], 5: [b, 2, hq]}[rank]
    kv_lead = {2: [], 3: [hkv], 4: [b, hkv], 5: [b, 2, hkv]}[rank]
    amp = rnd.choice([1.0, 1.0, 4.0])
    c = dict(q=torch.randn(*lead, lq, d, generator=g) * amp,
             k=torch.randn(*kv_lead, lk, d, generator=g) * amp,
             v=torch.randn(*kv_lead, lk, dv, generator=g))
    r = rnd.random()
    if r < 0.25:
        c["causal"] = "top-left"
    elif r < 0.5:
        c["causal"] = "bottom-right"
    m = rnd.random()
    if m < 0.2:
        c["mask"] = torch.rand(lq, lk, generator=g) < 0.7
    elif m < 0.35:
        bias = torch.randn(lq, lk, generator=g)
        c["mask"] = bias.masked_fill(torch.rand(lq, lk, generator=g) < 0.2, float("-inf"))
    elif m < 0.45 and rank >= 4:
        # A key-padding mask: per batch, broadcast over heads and query rows.
        c["mask"] = torch.rand(b, *([1] * (rank - 3)), 1, lk, generator=g) < 0.8
    if rnd.random() < 0.2:
        c["scale"] = rnd.choice([0.05, 0.3, 1.5])
    if DTYPE_ARGS:
        # 16-bit: torch_parity rounds q, k and v and compares in f32 (its 16-bit rule).
        return c
    # f32 values held in f64, so that torch computes the exact answer (the tool reads the
    # f64 .npy files as f32 without rounding anything); against torch's own f32 result, large
    # logits would measure torch's rounding as much as ours.
    exact = {k: x.double() if torch.is_tensor(x) and x.is_floating_point() else x for k, x in c.items()}
    # Large logits only (amplitude or scale above 1), as in tests/suite/properties.rs.
    if amp > 1.0 or c.get("scale", 0.0) > 1.0:
        exact["allow"] = allowance(exact)
    return exact


def allowance(c):
    """The rule of tests/suite/common/mod.rs for ill-conditioned problems: rerun the exact answer
    with q perturbed elementwise by +-eps*D (eps the f32 epsilon; the worst-case relative
    growth of an f32 dot product of length D), three times with independent signs, and
    allow 4x the largest change. Well-conditioned cases get next to nothing."""
    base = tp.sdpa(*args(c))
    rel = 2.0 ** -23 * c["q"].shape[-1]
    change = 0.0
    for _ in range(3):
        signs = torch.randint(0, 2, c["q"].shape, generator=g).double() * 2 - 1
        moved = dict(c, q=c["q"] * (1 + rel * signs))
        change = max(change, float((tp.sdpa(*args(moved)) - base).abs().max()))
    return 4.0 * change


def args(c):
    return c["q"], c["k"], c["v"], c.get("mask"), c.get("causal"), c.get("scale")


def main():
    tp.CASES = [("fuzz %d" % i, case()) for i in range(N)]
    for name, c in tp.CASES:
        print(name, {k: tuple(v.shape) if hasattr(v, "shape") else v for k, v in c.items()})
    tp.main()


if __name__ == "__main__":
    main()
