#!/usr/bin/env bash
# The README's "side by side with PyTorch" run in one go: the CPU's ceilings, the three
# tables (prefill, causal prefill, decode), the GQA-8 decode, the load probe, the long causal
# case's peak memory, and the ceilings again. Developer check (needs torch; CI has none).
# Run on a quiet machine: anything else running shares the cores.
#
# Usage: bash scripts/side_by_side.sh [path/to/wgpu-attention]   (builds what it needs)
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
cargo build --release --quiet --bin wgpu-attention --example cpu_ceiling --example load_costs
TOOL="${1:-target/release/wgpu-attention}"

date -u
git log --oneline -1
echo "== cargo run --release --example cpu_ceiling"; target/release/examples/cpu_ceiling
for args in "--shape 1,8,1024,1024,64 --path all" \
            "--shape 1,8,1024,1024,64 --path all --causal top-left" \
            "--shape 1,32,1,4096,128 --kv-heads 8 --path all --reps 20" \
            "--shape 1,64,1,4096,128 --kv-heads 8 --path auto --reps 20"; do
    echo "== python3 scripts/torch_cpu_sdpa.py $args"
    # shellcheck disable=SC2086
    python3 scripts/torch_cpu_sdpa.py --tool "$TOOL" $args
done
echo "== cargo run --release --example load_costs"; target/release/examples/load_costs
echo "== /usr/bin/time -v wgpu-attention bench --shape 1,1,32768,32768,64 --causal top-left --reps 2"
/usr/bin/time -v "$TOOL" bench --shape 1,1,32768,32768,64 --causal top-left --reps 2 2>&1 \
    | grep -E "^path|^fused|Maximum resident"
echo "== cargo run --release --example cpu_ceiling"; target/release/examples/cpu_ceiling
date -u
