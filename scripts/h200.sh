#!/usr/bin/env bash
# Parity tests and the benchmark grid on an NVIDIA H200 (Vulkan), for sessions lent the
# device machine. First run 2026-11-30 (docs/h200.md has its tables). The device machine
# has no Rust toolchain, so binaries are built here and carried (12 MB with the loader, under
# the 64 MiB carry limit).
#
#   here:   scripts/h200.sh prepare         # builds into .h200/, fetches the Vulkan loader
#   there:  device run, carry [".h200", ".gl"], command:
#           bash scripts/h200.sh device     # writes $OUT/h200.md and $OUT/log
#   on lavapipe, end to end before any device run (the cooperative-matrix tier emulated, a
#   small grid, the coop tests only):
#           H200_LOCAL=1 WGPU_ADAPTER_NAME=llvmpipe WGPU_ATTENTION_COOP=emulate \
#           H200_GRID="1,2,64,64,32 none 2 auto" H200_TESTS='coop::' \
#           H200_COOP_GRID="1,2,100,100,32 top-left 1 64x32 32x64" bash scripts/h200.sh device
#   then:   paste $OUT/h200.md into docs/h200.md, the headline into README "Measured".
#
# To compare builds of the tool side by side (kernel variants, an older revision), build each
# here first and name them: H200_VARIANTS="old=/tmp/wa-old dc16=/tmp/wa-dc16" scripts/h200.sh
# prepare. The device step then also runs each over H200_VARIANT_GRID (default: the goal's
# shape with `--path fused-tiled`, non-causal and causal, and two decode shapes with `--path
# decode`: a build before 2026-12-01, e.g. add6b23, runs decode's invocation form there, so
# the two forms of decode run side by side).
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
prepare)
    grep -qx '/.h200/' .git/info/exclude || echo /.h200/ >> .git/info/exclude
    grep -qx '/.gl/' .git/info/exclude || echo /.gl/ >> .git/info/exclude
    rm -rf .h200 && mkdir -p .h200/tests
    cargo build --release --bin wgpu-attention --example decode
    cp target/release/wgpu-attention target/release/examples/decode .h200/
    # Test binaries: cargo prints their paths as JSON lines.
    # Two: the suite (tests/suite/) and tests/lanes16.rs. The suite's cli:: and examples::
    # modules run the tool and cargo from this checkout's paths, which do not exist there
    # (`device` skips them); every GPU path is covered by the others.
    cargo test --release --no-run --message-format=json 2>/dev/null | python3 -c '
import json, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    exe = m.get("executable")
    if exe and m.get("profile", {}).get("test") and m["target"]["name"] in ("suite", "lanes16"):
        shutil.copy(exe, ".h200/tests/")
'
    # Carried paths are limited to 64 MiB: strip, and pack the test binaries (which share
    # most of their code) into one xz archive.
    strip .h200/wgpu-attention .h200/decode .h200/tests/*
    # The build the device's table names: the commit, marked where the tree had changes.
    echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- || echo ' with uncommitted changes'), built $(date -u +%F)" > .h200/BUILD
    if [ -n "${H200_VARIANTS:-}" ]; then
        mkdir -p .h200/variants
        for nv in $H200_VARIANTS; do
            cp "${nv#*=}" ".h200/variants/${nv%%=*}" && strip ".h200/variants/${nv%%=*}"
        done
    fi
    tar -C .h200 -cJf .h200/tests.tar.xz tests && rm -rf .h200/tests
    mkdir -p .gl /tmp/amd64/partial
    o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    # shellcheck disable=SC2086
    apt-get $o update -qq
    # shellcheck disable=SC2086
    # The Vulkan loader, and the GL vendor-neutral dispatch libraries that NVIDIA's Vulkan
    # driver (libGLX_nvidia) needs: without them the loader finds no driver.
    # shellcheck disable=SC2086
    (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
    du -sh .h200 .gl
    ;;
device)
    # H200_PART: all (default), bench, tests, coop (auto and the tiled tier at the
    # cooperative-matrix tier's shapes, the hidden cases' flow, PyTorch's rows, then the
    # tier's forced variants until H200_COOP_DEADLINE: the first run where device time is
    # short, in one call of about 540 s), decode
    # (decode's rows, decode_rows below, and PyTorch's) or run (`run --dtype f16` on
    # GPU-sized problems beside PyTorch's f16 error, below). H200_GRID: a
    # different bench grid, one "B,H,Lq,Lk,D causal kv-heads paths" entry per line (to try
    # the script elsewhere).
    # Every step has a timeout and a failure does not stop the rest: one device run must
    # bring back as much as it can.
    set +e
    part="${H200_PART:-all}"
    out="${OUT:-/tmp}"
    exec > >(tee "$out/log") 2>&1
    step() { echo "== [$SECONDS s] $*"; }
    tar -C .h200 -xJf .h200/tests.tar.xz
    # One table row per JSON line of a bench run: row FILE SHAPE KVH CAUSAL [LABEL [VARIANT]],
    # VARIANT the cooperative-matrix variant the run forced.
    row() {
        python3 - "$@" <<'PY'
import json, re, sys
path, shape, kvh, causal = sys.argv[1:5]
label = sys.argv[5] if len(sys.argv) > 5 else ""
forced = sys.argv[6] if len(sys.argv) > 6 else ""
for line in open(path):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    num = lambda x, f: "NaN" if x is None else format(x, f)  # bench writes null for NaN
    row_label = label  # this row's, so that one row's remarks stay off the next
    # A forced cooperative-matrix variant that the plan did not take (it does not fit the
    # device or hold the widths) ran the default one: say so.
    if forced and f"variant {forced}:" not in r.get("notes", ""):
        row_label += " (not taken: the default ran)"
    # A path run again on a new device without the tier after a loss (a hang) with it.
    if r.get("notes", "").startswith("run again without the tier"):
        row_label += " (without the tier: the device was lost with it)"
    # Keys asked to be split ("+kN", N > 1) that the plan ran in one range.
    asked = re.search(r"\+k([0-9]+)", label)
    if asked and int(asked.group(1)) > 1 and "key ranges side by side" not in r.get("notes", ""):
        row_label += " (keys not split)"
    print(f"| {shape} | {kvh} | {causal} | {r['path']}{row_label} | {num(r['ms'], '.3f')} "
          f"| {num(r['gflops'], '.1f')} | {num(r['gbps'], '.1f')} | {num(r['max_abs_err'], '.1e')} |")
PY
    }
    # One bench row of the main binary: shape, kv heads, then bench's other arguments.
    bench_row() {
        local shape=$1 kvh=$2
        shift 2
        local args=(bench --shape "$shape" --kv-heads "$kvh" --reps 10 --json "$@")
        step "${args[*]}"
        timeout 180 ./.h200/wgpu-attention "${args[@]}" > /tmp/bench.json
        echo "exit $?"
        cat /tmp/bench.json
        row /tmp/bench.json "$shape" "$kvh" none "${ROW_LABEL:-}" >> "$out/h200.md"
    }
    # Decode at the issue's three shapes (H200_DECODE_SHAPES for others): f32 and f16 K
    # and V (an f16 KvCache on the device, read as f16 by both forms), and beside the
    # workgroup form's default (K staged through workgroup memory, V loads in batches of 8,
    # 16 for f16 K/V,
    # the output loop's invocation sets sharing out V's keys: crate::decode::stage_k,
    # load_batch, v_by_keys; and the merge with a lane for every 4 splits:
    # crate::kernel::merge::lanes) the merge with one invocation an output
    # (WGPU_ATTENTION_MERGE_LANES=1), f32 loads in batches of 16 and f16 ones in batches of 8
    # (WGPU_ATTENTION_DECODE_BATCH: the other of the two), the form with the sets sharing out the rows
    # (WGPU_ATTENTION_DECODE_V_KEYS=0), then also with each invocation reading its K row
    # (WGPU_ATTENTION_DECODE_STAGE=0), batched and one load at a time with the merge's one
    # lane an output (WGPU_ATTENTION_DECODE_BATCH=1: nearest the kernel the 2026-12-04 table
    # measured, which differs from it by the statistics step and the merge's one pass).
    decode_rows() {
        for shape in ${H200_DECODE_SHAPES:-1,32,1,4096,128 8,32,1,8192,128 1,32,1,32768,128}; do
            bench_row "$shape" 8 --path decode-workgroup
            bench_row "$shape" 8 --path decode,decode-workgroup --dtype f16
            for dtype in f32 f16; do
                other_batch=16
                [ "$dtype" = f16 ] && other_batch=8
                WGPU_ATTENTION_MERGE_LANES=1 ROW_LABEL=" [merge one lane an output]" \
                    bench_row "$shape" 8 --path decode-workgroup --dtype "$dtype"
                WGPU_ATTENTION_DECODE_BATCH=$other_batch ROW_LABEL=" [loads in batches of $other_batch]" \
                    bench_row "$shape" 8 --path decode-workgroup --dtype "$dtype"
                WGPU_ATTENTION_DECODE_V_KEYS=0 ROW_LABEL=" [V's sets share out rows]" \
                    bench_row "$shape" 8 --path decode-workgroup --dtype "$dtype"
                WGPU_ATTENTION_DECODE_V_KEYS=0 WGPU_ATTENTION_DECODE_STAGE=0 \
                    ROW_LABEL=" [rows, K read a row an invocation]" \
                    bench_row "$shape" 8 --path decode-workgroup --dtype "$dtype"
                WGPU_ATTENTION_DECODE_V_KEYS=0 WGPU_ATTENTION_DECODE_STAGE=0 \
                    WGPU_ATTENTION_DECODE_BATCH=1 WGPU_ATTENTION_MERGE_LANES=1 \
                    ROW_LABEL=" [rows, K a row an invocation, loads one at a time, merge one lane]" \
                    bench_row "$shape" 8 --path decode-workgroup --dtype "$dtype"
            done
        done
    }
    # The hidden cases' flow (issue 36), about a minute: GPU-sized f16 problems through
    # `run --dtype f16 --path auto` (float16 .npy in and out), each against SDPA in f64 on
    # the same inputs beside PyTorch's own f16 error (scripts/torch_run_f16.py; locally
    # H200_PYTHON names a python with numpy, H200_RUN_CASES smaller cases). Its table is
    # appended to the page.
    run_flow() {
        step "run --dtype f16 --path auto, beside PyTorch's f16 error"
        echo >> "$out/h200.md"
        timeout 420 "${H200_PYTHON:-python3}" scripts/torch_run_f16.py ./.h200/wgpu-attention \
            | tee -a "$out/h200.md"
        echo >> "$out/h200.md"
    }
    # PyTorch's SDPA on the same GPU in f32, f16 and bf16 at the tier's target shapes and
    # decode's (scripts/torch_gpu_sdpa.py), appended to the page. Where H200_LOCAL, only
    # with TORCH_SDPA_SHAPES (smaller shapes; H200_PYTHON a python with torch, which then
    # runs them on the CPU: the rehearsal).
    torch_rows() {
        if [ -z "${H200_LOCAL:-}" ] || [ -n "${TORCH_SDPA_SHAPES:-}" ]; then
            step "torch SDPA on the same GPU (CUDA) in f32, f16 and bf16, for comparison"
            echo >> "$out/h200.md"
            timeout 240 "${H200_PYTHON:-python3}" scripts/torch_gpu_sdpa.py | tee -a "$out/h200.md"
            echo >> "$out/h200.md"
        fi
    }
    if [ -z "${H200_LOCAL:-}" ]; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
        if ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
            export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
        fi
        nvidia-smi -L
    fi
    export WGPU_BACKEND=vulkan REQUIRE_GPU=1 XDG_RUNTIME_DIR=/tmp
    export WGPU_ADAPTER_NAME="${WGPU_ADAPTER_NAME:-NVIDIA}"
    step devices
    timeout 60 ./.h200/wgpu-attention devices | tee /tmp/devices.txt
    # Every figure names its card: the table opens with the adapter the runs take (the one
    # `devices` marks as the default under WGPU_ADAPTER_NAME), its driver, the build, the
    # date.
    card="$(awk '/^\[[0-9]+\] .*\(default\)$/ { sub(/^\[[0-9]+\] /, ""); sub(/ \(default\)$/, "");
        name = $0; getline; sub(/^ *driver: /, ""); print name ", driver " $0; exit }' /tmp/devices.txt)"
    header="Card: ${card}. Build: $(cat .h200/BUILD 2>/dev/null || echo unknown). Run: $(date -u '+%F %H:%M') UTC, H200_PART=${part}."
    # Each entry is one bench invocation: its paths share one set of inputs, side by side.
    # The D = 256 entries measure the wide variants (auto takes decode's and the tiled
    # tier's there since the second H200 session); D = 512 (an MLA-like group of 16 query
    # heads over one kv head) decode's workgroup form, the only decode form that takes it,
    # against the unfused path; prefill at D = 512 the tiled tier's widest variant (since
    # 2026-12-02; auto leaves it to callers who ask until it is measured here) against the
    # unfused path. The last records what the subgroup tier
    # does on this driver (refused on GPUs: its error).
    grid="${H200_GRID:-4,32,4096,4096,128 none 32 auto,unfused,fused-portable
4,32,4096,4096,128 top-left 32 auto,fused-portable
1,8,1024,1024,64 none 8 auto,unfused,fused-portable
1,8,1024,1024,64 top-left 8 auto
1,32,1,4096,128 none 8 auto,unfused,fused-tiled,decode
4,32,1,4096,128 none 32 auto
1,32,4,4096,128 none 8 auto
2,16,2048,2048,256 none 16 auto,unfused,fused-tiled
2,16,2048,2048,256 top-left 16 unfused,fused-tiled
1,16,1,4096,256 none 8 auto,unfused,fused-tiled,decode
1,16,1,4096,512 none 1 auto,unfused
2,16,2048,2048,512 none 16 unfused,fused-tiled
1,2,256,256,128 none 2 fused-subgroup}"
    if [ "$part" != tests ] && [ "$part" != run ]; then
        step bench
        printf '%s\n\n' "$header" > "$out/h200.md"
        # Before the tier's rows, the probe of its cooperative operations
        # (src/fused/coop/probe.rs, a second or two): where it fails, its line names the
        # operation, and auto's f16 rows below will not have taken fused-coop.
        if [ "$part" != decode ]; then
            step "the cooperative operations' probe"
            for t in .h200/tests/suite-*; do
                verdict=$(timeout 120 "$t" --exact coop::cooperative_operations_match_their_definitions 2>&1 \
                    | grep -E "^test coop::|the cooperative operations' probe" | head -3 | tr '\n' ' ')
                echo "$verdict"
                printf 'Probe of the cooperative operations: %s\n\n' "${verdict:-no result}" >> "$out/h200.md"
            done
        fi
        echo "| shape | kv heads | causal | path | ms | GFLOP/s | GB/s | max err |" >> "$out/h200.md"
        echo "|---|---:|---|---|---:|---:|---:|---:|" >> "$out/h200.md"
        # First, as it matters most (issue 6): the cooperative-matrix tier on f16 inputs at
        # its target shapes, each of its variants that takes the widths (forced with
        # WGPU_ATTENTION_COOP_VARIANT), beside auto and the f32 tiled tier on the same
        # inputs, and at the first shape auto on f32 inputs with f16 compute asked for
        # (--precision f16, which takes the tier there).
        # PyTorch's SDPA in f32, f16 and bf16 on these shapes follows at the end.
        # The k64 variants (blocks of 64 keys) and the K/V prefetch ("+p":
        # WGPU_ATTENTION_COOP_PREFETCH=1) are never auto's choice until these rows say they
        # are faster: crate::fused::coop::Variant::ALL, coop::prefetch. "+r1" rows run the
        # output tiles of one row of blocks a subgroup (WGPU_ATTENTION_COOP_OUT_ROWS=1, the
        # layout before 2026-12-06) beside the default two (coop::output_rows); "+q1" rows
        # the score tiles of one row of blocks (WGPU_ATTENTION_COOP_SCORE_ROWS=1, the layout
        # before 2026-12-07) beside the default two (coop::score_rows); "+s1" rows
        # the weights P in one f16 part (WGPU_ATTENTION_COOP_SPLIT_P=0, as before 2026-12-06)
        # beside the default two parts where they fit (coop::split_weights); "+kN" rows each
        # row's keys in N ranges side by side, merged (WGPU_ATTENTION_COOP_KEY_SPLITS=N),
        # beside the default (coop::key_splits: at 1,8,1024,1024,64 two ranges, where 128
        # workgroups are about one a multiprocessor; "+k1" is the one range of before).
        # Heads of 256 (since 2026-12-07, the session after the probe) run the 32 x 256
        # variant, beside the tiled tier's wide variant that auto took before.
        # The last three lines are the issue's decode targets on f16 K/V (auto takes
        # decode there), so that the coop part's one call has them beside PyTorch's too.
        if [ "$part" != decode ]; then
            cgrid="${H200_COOP_GRID:-4,32,4096,4096,128 none 32 64x128 64x128+s1 64x128+r1 64x128+q1 64x128+p 64x128k64 64x128k64+p 32x128 32x128k64
4,32,4096,4096,128 top-left 32 64x128 64x128+s1 64x128+r1 64x128+q1 64x128+p 64x128k64 64x128k64+p 32x128
1,32,4096,4096,128 top-left 8 64x128 64x128+s1 64x128+r1 64x128+q1 64x128+p 64x128k64 32x128 16x128
1,8,1024,1024,64 none 8 64x64 64x64+k1 64x64+k4 64x64+s1 64x64+r1 64x64+q1 64x64+p 64x64k64 32x64 16x64 16x64+k1 64x32
1,8,1024,1024,64 top-left 8 64x64 64x64+k1 64x64+k4 64x64+s1 64x64+r1 64x64+p 64x64k64 32x64 16x64
2,16,2048,2048,256 none 16 32x256 32x256+s1
1,32,1,4096,128 none 8
8,32,1,8192,128 none 8
1,32,1,32768,128 none 8}"
            # First auto and the tiled tier on every shape (the rows the comparison needs
            # most), then the forced variants; a variant's row is skipped, and says so, once
            # the run is past H200_COOP_DEADLINE seconds, so that the call ends within its
            # timeout: with H200_PART=coop, where PyTorch's rows come before the variants'
            # (below), 460 by default, for a call of about 540 s; else 360, so that PyTorch's
            # rows, which then come after, still fit one such call.
            deadline="${H200_COOP_DEADLINE:-360}"
            [ "$part" = coop ] && deadline="${H200_COOP_DEADLINE:-460}"
            while read -r shape causal kvh variants; do
                [ -z "$shape" ] && continue
                args=(bench --shape "$shape" --kv-heads "$kvh" --path auto,fused-tiled --dtype f16 --reps 10 --json)
                [ "$causal" != none ] && args+=(--causal "$causal")
                step "${args[*]}"
                timeout 180 ./.h200/wgpu-attention "${args[@]}" > /tmp/bench.json
                echo "exit $?"
                cat /tmp/bench.json
                row /tmp/bench.json "$shape" "$kvh" "$causal" " f16 inputs" >> "$out/h200.md"
                if [ -z "${precision_row:-}" ]; then
                    precision_row=done
                    args=(bench --shape "$shape" --kv-heads "$kvh" --path auto --precision f16 --reps 10 --json)
                    [ "$causal" != none ] && args+=(--causal "$causal")
                    step "${args[*]}"
                    timeout 180 ./.h200/wgpu-attention "${args[@]}" > /tmp/bench.json
                    echo "exit $?"
                    cat /tmp/bench.json
                    row /tmp/bench.json "$shape" "$kvh" "$causal" " f32 inputs, --precision f16" >> "$out/h200.md"
                fi
            done <<< "$cgrid"
            # With H200_PART=coop, then the hidden cases' flow (H200_COOP_RUN=0 leaves it
            # out) and PyTorch's rows, before the forced variants, which the deadline cuts
            # short (since 2026-12-07, fourth session: the device machine goes back after
            # 30 s idle, so a second call would start a fresh one; what the comparison and
            # the issue's judging need comes first, the tuning after).
            if [ "$part" = coop ]; then
                [ "${H200_COOP_RUN:-1}" != 0 ] && run_flow
                torch_rows
                echo >> "$out/h200.md"
                echo "| shape | kv heads | causal | path | ms | GFLOP/s | GB/s | max err |" >> "$out/h200.md"
                echo "|---|---:|---|---|---:|---:|---:|---:|" >> "$out/h200.md"
            fi
            while read -r shape causal kvh variants; do
                [ -z "$shape" ] && continue
                for variant in $variants; do
                    if [ "$SECONDS" -ge "$deadline" ]; then
                        step "skipped [$variant] at $shape $causal: past H200_COOP_DEADLINE=$deadline s"
                        echo "| $shape | $kvh | $causal | fused-coop f16 [$variant] (skipped: past H200_COOP_DEADLINE=$deadline s) | | | | |" >> "$out/h200.md"
                        continue
                    fi
                    name=${variant%%+*}
                    prefetch=0
                    out_rows=2
                    score_rows=2
                    split=1
                    splits=""
                    [[ "$variant" =~ \+k([0-9]+) ]] && splits=${BASH_REMATCH[1]}
                    [[ "$variant" == *+p* ]] && prefetch=1
                    [[ "$variant" == *+r1* ]] && out_rows=1
                    [[ "$variant" == *+q1* ]] && score_rows=1
                    [[ "$variant" == *+s1* ]] && split=0
                    args=(bench --shape "$shape" --kv-heads "$kvh" --path fused-coop --dtype f16 --reps 10 --json)
                    [ "$causal" != none ] && args+=(--causal "$causal")
                    step "WGPU_ATTENTION_COOP_VARIANT=$name WGPU_ATTENTION_COOP_PREFETCH=$prefetch WGPU_ATTENTION_COOP_OUT_ROWS=$out_rows WGPU_ATTENTION_COOP_SCORE_ROWS=$score_rows WGPU_ATTENTION_COOP_SPLIT_P=$split WGPU_ATTENTION_COOP_KEY_SPLITS=$splits ${args[*]}"
                    WGPU_ATTENTION_COOP_VARIANT=$name WGPU_ATTENTION_COOP_PREFETCH=$prefetch \
                        WGPU_ATTENTION_COOP_OUT_ROWS=$out_rows WGPU_ATTENTION_COOP_SCORE_ROWS=$score_rows \
                        WGPU_ATTENTION_COOP_SPLIT_P=$split \
                        WGPU_ATTENTION_COOP_KEY_SPLITS=$splits timeout 180 ./.h200/wgpu-attention "${args[@]}" > /tmp/bench.json
                    echo "exit $?"
                    cat /tmp/bench.json
                    row /tmp/bench.json "$shape" "$kvh" "$causal" " [$variant]" "$name" >> "$out/h200.md"
                done
            done <<< "$cgrid"
        fi
        # The rest of the bench part; H200_PART=coop skips to PyTorch's rows, and
        # H200_PART=decode runs only decode's rows before them.
        if [ "$part" = decode ]; then
            decode_rows
        elif [ "$part" != coop ]; then
        while read -r shape causal kvh paths; do
            [ -z "$shape" ] && continue
            args=(bench --shape "$shape" --kv-heads "$kvh" --path "$paths" --reps 10 --json)
            [ "$causal" != none ] && args+=(--causal "$causal")
            step "${args[*]}"
            timeout 180 ./.h200/wgpu-attention "${args[@]}" > /tmp/bench.json
            echo "exit $?"
            cat /tmp/bench.json
            row /tmp/bench.json "$shape" "$kvh" "$causal" >> "$out/h200.md"
        done <<< "$grid"
        # Each variant build runs these (shape, causal, kv heads, paths; fused-tiled when no
        # paths are given): the tiled tier at the goal's shape, and decode (a build before
        # decode_workgroup.wgsl runs decode's invocation form there).
        vgrid="${H200_VARIANT_GRID:-4,32,4096,4096,128 none 32
4,32,4096,4096,128 top-left 32
1,32,1,4096,128 none 8 decode
1,16,1,4096,256 none 8 decode}"
        for bin in .h200/variants/*; do
            [ -x "$bin" ] || continue
            while read -r shape causal kvh vpaths; do
                [ -z "$shape" ] && continue
                args=(bench --shape "$shape" --kv-heads "$kvh" --path "${vpaths:-fused-tiled}" --reps 10 --json)
                [ "$causal" != none ] && args+=(--causal "$causal")
                step "$bin ${args[*]}"
                timeout 180 "$bin" "${args[@]}" > /tmp/bench.json
                echo "exit $?"
                cat /tmp/bench.json
                row /tmp/bench.json "$shape" "$kvh" "$causal" " [${bin##*/}]" >> "$out/h200.md"
            done <<< "$vgrid"
        done
        # The fixed rows below are the H200's shapes, far too large for a local check.
        if [ -z "${H200_LOCAL:-}" ]; then
        decode_rows
        # Few query rows per head with GQA (speculative decoding): the tiled tier's GQA
        # units put a group's 4 heads in one block (since 2026-12-01), beside decode.
        for shape in 1,32,8,4096,128 4,32,16,4096,128; do
            bench_row "$shape" 8 --path fused-tiled,decode-workgroup,unfused
        done
        # Prefill on f16 K and V (the tiled tier reads them as f16 since 337638b) at the
        # goal's shape, beside its f32 row above.
        bench_row 4,32,4096,4096,128 32 --path fused-tiled --dtype f16
        # Masks at the goal's shape (packed into bits and vec4 bias rows since 2026-12-01):
        # a key-padding mask and a float (Lq, Lk) bias, beside the unmasked row above.
        bench_row 4,32,4096,4096,128 32 --path fused-tiled --mask padding
        bench_row 4,32,4096,4096,128 32 --path fused-tiled --mask bias
        # Decode steps through an f32 and an f16 KvCache (f16 halves what decode reads),
        # wall clock a step with q's upload and the readback, each checked against the
        # reference; 65 536 cached positions so that the cache's bytes weigh.
        step "decode through f32 and f16 KvCaches: examples/decode.rs 32 8 128 65536"
        timeout 300 ./.h200/decode 32 8 128 65536 | tee -a "$out/h200.md"
        fi
        fi
        cat "$out/h200.md"
        [ "$part" = coop ] || torch_rows
    fi
    # H200_PART=run runs the hidden cases' flow alone (run_flow above); all and tests run
    # it here, coop after auto's rows.
    if [ "$part" = all ] || [ "$part" = tests ] || [ "$part" = run ]; then
        [ "$part" = all ] || printf '%s\n\n' "$header" > "$out/h200.md"
        run_flow
    fi
    if [ "$part" = all ] || [ "$part" = tests ]; then
        step "self-check (every path against the reference)"
        timeout 120 ./.h200/wgpu-attention | tee /tmp/selfcheck.txt
        rc=${PIPESTATUS[0]}
        # Its timing table into the page: where the tier runs on the matrix units, the
        # prefill rows with f16 compute too (since 2026-12-07).
        {
            printf '\nThe self-check (`wgpu-attention`, no arguments), exit %s; ' "$rc"
            printf 'its timing:\n\n```\n'
            sed -n '/^Timing of the planner/,$p' /tmp/selfcheck.txt
            printf '```\n'
        } >> "$out/h200.md"
        # Parity: the suite and lanes16 (the README doctest needs cargo and is skipped here).
        # H200_TESTS: test name filters for the suite (default all), e.g. 'coop:: f16::'.
        for t in .h200/tests/*; do
            step "$t"
            # shellcheck disable=SC2086
            timeout "${H200_TEST_TIMEOUT:-480}" "$t" --test-threads 4 --skip cli:: \
                --skip examples:: ${H200_TESTS:-}
            rc=$?
            [ $rc -ne 0 ] && echo "FAILED ($rc): $t"
        done
        # What the matrix units make of fused-coop's two-part weights: the f32 output's
        # worst error on inputs exact in f16 (lavapipe, emulated: up to 7.2e-7; with one part
        # up to 3.4e-4). The line is the test's own, which libtest shows only so.
        step "fused-coop's f32 error on inputs exact in f16"
        for t in .h200/tests/suite-*; do
            timeout 120 "$t" --exact coop::f16_inputs_with_the_weights_in_two_parts \
                --nocapture 2>&1 | grep -E "error at most|test result"
        done
    fi
    step done
    ;;
*)
    echo "usage: scripts/h200.sh prepare|device" >&2
    exit 2
    ;;
esac
