#!/usr/bin/env python3
"""Two or more builds of `wgpu-attention`, non-causal and causal, in paired rounds.

Developer check for lavapipe, whose timings drift by tens of percent within minutes: each
round runs `bench --path PATH --reps REPS --json` for every build, first without and then
with `--causal top-left`, so that the builds meet the same noise. Prints per build the
median and best GFLOP/s of each mode (causal FLOPs for causal) and the median of the
per-round causal / non-causal ratios. A row whose max error exceeds 1e-4 is reported.

Usage: python3 scripts/paired_rounds.py ROUNDS SHAPE NAME=TOOL [NAME=TOOL ...]
           [--path fused] [--reps 5] [--kv-heads N]
e.g.   python3 scripts/paired_rounds.py 6 1,8,1024,1024,64 old=/tmp/wa-old new=target/release/wgpu-attention
"""
import argparse
import json
import statistics
import subprocess

ap = argparse.ArgumentParser()
ap.add_argument("rounds", type=int)
ap.add_argument("shape")
ap.add_argument("builds", nargs="+", help="NAME=path/to/wgpu-attention")
ap.add_argument("--path", default="fused")
ap.add_argument("--reps", default="5")
ap.add_argument("--kv-heads", default=None, help="passed on to bench (GQA)")
a = ap.parse_args()
builds = [b.split("=", 1) for b in a.builds]
modes = [("non-causal", []), ("causal", ["--causal", "top-left"])]
results = {}
for _ in range(a.rounds):
    for name, tool in builds:
        for mode, flags in modes:
            cmd = [tool, "bench", "--shape", a.shape, "--path", a.path, "--reps", a.reps, "--json"]
            if a.kv_heads:
                cmd += ["--kv-heads", a.kv_heads]
            out = subprocess.run(cmd + flags, capture_output=True, text=True).stdout
            for line in out.splitlines():
                if line.startswith("{"):
                    row = json.loads(line)
                    results.setdefault((name, mode), []).append(row["gflops"])
                    # null: the output held NaN where it was checked.
                    if row["max_abs_err"] is None or row["max_abs_err"] > 1e-4:
                        print(f"error: {name} {mode} max abs err {row['max_abs_err']}")
for name, _ in builds:
    full, causal = results.get((name, "non-causal"), []), results.get((name, "causal"), [])
    if not full or not causal:
        print(f"{name}: no results")
        continue
    ratios = [c / f for c, f in zip(causal, full)]
    print(
        f"{name:10s} non-causal median {statistics.median(full):6.1f} best {max(full):6.1f}"
        f" | causal median {statistics.median(causal):6.1f} best {max(causal):6.1f}"
        f" | median causal/non-causal {statistics.median(ratios):.2f}"
    )
