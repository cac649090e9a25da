#!/usr/bin/env bash
# Parity tests and the benchmark grid on an NVIDIA H200 (Vulkan), for sessions lent the
# device machine. The device half has NOT YET RUN (no session has drawn a device); the
# prepare half was run and its output fits the 64 MiB carry limit. Expect to fix small
# things on the first device run. The device machine has no Rust toolchain, so binaries are built
# here and carried.
#
#   here:   scripts/h200.sh prepare         # builds into .h200/, fetches the Vulkan loader
#   there:  device run, carry [".h200", ".gl"], command:
#           bash scripts/h200.sh device     # writes $OUT/h200.md and $OUT/log
#   then:   paste $OUT/h200.md into README "Measured".
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
prepare)
    grep -qx '/.h200/' .git/info/exclude || echo /.h200/ >> .git/info/exclude
    grep -qx '/.gl/' .git/info/exclude || echo /.gl/ >> .git/info/exclude
    rm -rf .h200 && mkdir -p .h200/tests
    cargo build --release
    cp target/release/wgpu-attention .h200/
    # Test binaries: cargo prints their paths as JSON lines.
    # tests/cli.rs and tests/examples.rs run the tool and cargo from this checkout's paths,
    # which do not exist there; every GPU path is covered by the others.
    cargo test --release --no-run --message-format=json 2>/dev/null | python3 -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    exe = m.get("executable")
    if exe and m.get("profile", {}).get("test") and m["target"]["name"] not in ("cli", "examples"):
        shutil.copy(exe, ".h200/tests/")
'
    # Carried paths are limited to 64 MiB: strip, and pack the test binaries (which share
    # most of their code) into one xz archive.
    strip .h200/wgpu-attention .h200/tests/*
    tar -C .h200 -cJf .h200/tests.tar.xz tests && rm -rf .h200/tests
    mkdir -p .gl /tmp/amd64/partial
    o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    # shellcheck disable=SC2086
    apt-get $o update -qq
    # shellcheck disable=SC2086
    (cd .gl && apt-get $o download libvulkan1)
    du -sh .h200 .gl
    ;;
device)
    tar -C .h200 -xJf .h200/tests.tar.xz
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    if ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    fi
    export WGPU_BACKEND=vulkan WGPU_ADAPTER_NAME=NVIDIA REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp
    out="${OUT:-/tmp}"
    exec > >(tee "$out/log") 2>&1
    ./.h200/wgpu-attention devices
    # Parity: every test binary (the README doctest needs cargo and is skipped here).
    for t in .h200/tests/*; do
        echo "== $t"
        "$t" --test-threads 2 || echo "FAILED: $t"
    done
    {
        echo "| shape | causal | path | ms | GFLOP/s | GB/s | max err |"
        echo "|---|---|---|---:|---:|---:|---:|"
        # GPU paths only: the CPU baseline would take minutes per run at these sizes.
        for spec in "4,32,4096,4096,128 none 32 auto,unfused,fused-subgroup,fused-portable" \
                    "4,32,4096,4096,128 top-left 32 auto,fused-subgroup,fused-portable" \
                    "1,8,1024,1024,64 none 8 auto,unfused,fused-subgroup,fused-portable" \
                    "1,32,1,4096,128 none 8 auto,unfused,fused-subgroup,decode"; do
            set -- $spec
            for path in ${4//,/ }; do
                args=(bench --shape "$1" --kv-heads "$3" --path "$path" --reps 10 --json)
                [ "$2" != none ] && args+=(--causal "$2")
                ./.h200/wgpu-attention "${args[@]}" | while read -r line; do
                    python3 - "$line" "$1" "$2" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['path']} | {r['ms']:.3f} | {r['gflops']:.1f} | {r['gbps']:.1f} | {r['max_abs_err']:.1e} |")
PY
                done
            done
        done
    } | tee "$out/h200.md"
    ;;
*)
    echo "usage: scripts/h200.sh prepare|device" >&2
    exit 2
    ;;
esac
