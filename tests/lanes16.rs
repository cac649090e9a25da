//! The subgroup tier's 16-key variants (`fused::kernels::SUBGROUP_TEXTURE_16` and
//! `SUBGROUP_WIDE_TEXTURE_16`, which read K and V from textures, and their storage-buffer
//! forms `SUBGROUP_16`, `SUBGROUP_WIDE_16`), which run where every subgroup has 16
//! lanes: on lavapipe with `LP_NATIVE_VECTOR_WIDTH=512`
//! (wgpu_attention::cpu_vectors). The driver reads that variable once per process, so this
//! test is its own binary with a plain `main` (Cargo.toml: `harness = false`) that sets it
//! before creating the context (`cpu_vectors::use_wide`, which also keeps the 512-bit code in
//! a Mesa cache directory of its own). It sets 512 whatever the CPU: without AVX-512, LLVM
//! splits the vectors, which is slower but computes the same.
//!
//! Against the reference, forced and through auto: lengths around the 16-key block, Lq != Lk
//! both ways, both causal alignments, widths that need padding, GQA, bool and additive masks,
//! large logits, rows with no key, the wide variant, and the llvmpipe loop limit (one pass at
//! the most keys the estimate allows, two key ranges one block past it), all with K/V read from
//! textures; then the storage-buffer form, in a context whose texture limit turns textures
//! off, and the textures in the memory estimate; f16 and bf16 K and V read from their 16-bit
//! textures (rgba16float, rg32uint), standard and wide. Other adapters have no
//! 16-lane variant to test: the binary returns early there.

#[path = "suite/common/mod.rs"]
mod common;

use common::{assert_parity, assert_parity_conditioned, inputs, Rng};
use wgpu_attention::fused::subgroup_keys;
use wgpu_attention::loops::{self, subgroup_block, LLVMPIPE_LOOP_LIMIT, SLACK};
use wgpu_attention::{
    memory_estimate, AttentionOptions, Causal, Context, Mask, PathChoice, Tolerance,
};

fn main() {
    // Before the first context (common::ctx creates it): the driver reads it when it loads.
    // Also a cache directory of its own, so 512-bit code never lands in other tests' cache.
    wgpu_attention::cpu_vectors::use_wide();
    // Mesa creates only the last component of the directory it is given, so use_wide
    // creates ours (on a machine without ~/.cache, Mesa ran without any cache).
    let ours = wgpu_attention::cpu_vectors::wide_cache_dir();
    let set = std::env::var_os(wgpu_attention::cpu_vectors::CACHE_VAR);
    if let (Some(ours), Some(set)) = (ours, set) {
        if std::path::Path::new(&set) == ours {
            assert!(ours.is_dir(), "use_wide did not create {}", ours.display());
        }
    }
    let Some(ctx) = common::ctx() else { return };
    if !loops::limited(ctx.adapter_info()) {
        eprintln!("not llvmpipe: no 16-lane variant to test");
        return;
    }
    assert_eq!(
        subgroup_keys(ctx.adapter_info()),
        16,
        "llvmpipe with {}=512 should report 16-lane subgroups: {:?}",
        wgpu_attention::cpu_vectors::VAR,
        ctx.adapter_info()
    );
    let cases: [(&str, Case); 8] = [
        (
            "lengths, widths and causal rules",
            lengths_widths_and_causal_rules,
        ),
        ("decode up to 4 rows per kv head", decode_rows),
        ("GQA and masks", gqa_and_masks),
        (
            "large logits and rows with no key",
            large_logits_and_empty_rows,
        ),
        ("the wide variant", wide_variant),
        ("the loop limit", loop_limit),
        (
            "K/V from textures or from storage buffers",
            texture_and_buffer_forms,
        ),
        ("16-bit K/V from textures", half_textures),
    ];
    // Two workers take the cases in turn, each on a context of its own (common::ctx: the
    // driver compiles at a pipeline's first dispatch on its device's queue thread, so two
    // devices compile on two cores); a panic in either fails the process when the scope
    // joins.
    drop(ctx);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let ctx = common::ctx().expect("the context the main thread had");
                while let Some((name, case)) =
                    cases.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    case(&ctx);
                    println!("lanes16: {name} ... ok");
                }
            });
        }
    });
}

/// One group of checks; panics on the first mismatch.
type Case = fn(&Context);

fn subgroup<'a>(causal: Causal) -> AttentionOptions<'a> {
    AttentionOptions::default()
        .causal(causal)
        .path(PathChoice::FusedSubgroup)
        .with_lse()
}

/// At 16 lanes auto takes decode for up to 4 query rows per kv head and the subgroup tier
/// from 5 (decode::auto_rows): 4, 6 and 8 rows of a GQA group over 300 keys. Decode reads
/// K and V as vec4 here: its 64-bit loads ran twice as slow at 16 lanes (cpu_vectors::kv_words).
fn decode_rows(ctx: &Context) {
    let mut rng = Rng::new(167);
    for (hq, lq, want) in [
        (4, 1, "decode"),
        (2, 3, "fused-subgroup"),
        (4, 2, "fused-subgroup"),
    ] {
        let (q, k, v) = inputs(&mut rng, [1, hq, 1, lq, 300, 32, 32], 1.0);
        let what = format!("Hq{hq} Hkv1 Lq{lq}");
        let opts = AttentionOptions::default().with_lse();
        let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        assert_eq!(r.plan.path, want, "{what}: {}", r.plan.reason);
        if want == "decode" {
            assert!(
                r.plan.reason.contains("K/V read as vec4<f32>"),
                "{}",
                r.plan.reason
            );
        }
    }
}

/// Lq and Lk around the 16-key block (one key, a partial block, a block, one past it), each
/// causal rule, and (D, Dv) pairs whose rows per invocation range from 16 to 2 (R falls for
/// short rows, see fused::subgroup_layout), one of them padded from widths that are not
/// multiples of 4; then nine row blocks of one head, and R = 16 over long rows.
fn lengths_widths_and_causal_rules(ctx: &Context) {
    let mut rng = Rng::new(161);
    // One causal rule per width and length, in turn, so that each width and each length
    // meets every rule: each rule is a pipeline per width and R for the driver to compile
    // (at 512 bits, slower than at 256), and all three on every pair tripled the runs.
    let rules = [Causal::None, Causal::TopLeft, Causal::BottomRight];
    for (i, (d, dv)) in [(16, 32), (64, 64), (5, 63), (128, 128)]
        .into_iter()
        .enumerate()
    {
        let lengths = [(1, 1), (37, 15), (100, 16), (17, 17), (64, 1000), (300, 33)];
        for (j, (lq, lk)) in lengths.into_iter().enumerate() {
            let (q, k, v) = inputs(&mut rng, [1, 2, 2, lq, lk, d, dv], 1.0);
            let causal = rules[(i + j) % rules.len()];
            let what = format!("D{d} Dv{dv} Lq{lq} Lk{lk} {causal:?}");
            let r = assert_parity(ctx, &what, &q, &k, &v, &subgroup(causal), Tolerance::F32);
            assert_eq!(r.plan.path, "fused-subgroup", "{what}");
        }
    }
    // One kv head with 32 rows over 3000 keys: key ranges side by side (with 2+ threads),
    // in 16-key blocks, each causal rule.
    let (q, k, v) = inputs(&mut rng, [1, 4, 1, 8, 3000, 64, 64], 1.0);
    for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
        let what = format!("key ranges {causal:?}");
        let r = assert_parity(ctx, &what, &q, &k, &v, &subgroup(causal), Tolerance::F32);
        let threads = wgpu_attention::fused::cpu_adapter_threads();
        assert!(
            threads < 2 || r.plan.reason.contains("key ranges side by side"),
            "{what}: {}",
            r.plan.reason
        );
    }
    // Nine row blocks of 128 rows (R = 8), which causal runs number from both ends.
    let (q, k, v) = inputs(&mut rng, [1, 1, 1, 1100, 1100, 64, 64], 1.0);
    for causal in [Causal::TopLeft, Causal::BottomRight] {
        let what = format!("Lq1100 Lk1100 {causal:?}");
        assert_parity(ctx, &what, &q, &k, &v, &subgroup(causal), Tolerance::F32);
    }
    // R = 16 (D = 16, Dv = 32) over rows enough for two workgroups a thread.
    let threads = wgpu_attention::fused::cpu_adapter_threads();
    let lq = 512 * threads;
    let layout = wgpu_attention::fused::subgroup_layout(16, 32, 1, 0..1, lq, threads);
    assert_eq!(layout.rows_per_invocation, 16, "{layout:?}");
    let (q, k, v) = inputs(&mut rng, [1, 1, 1, lq, 40, 16, 32], 1.0);
    assert_parity(
        ctx,
        "R16",
        &q,
        &k,
        &v,
        &subgroup(Causal::None),
        Tolerance::F32,
    );
    // Auto picks the subgroup tier on lavapipe, so it runs the 16-key variant too.
    let (q, k, v) = inputs(&mut rng, [2, 3, 3, 200, 250, 64, 64], 1.0);
    let auto = AttentionOptions::default()
        .causal(Causal::TopLeft)
        .with_lse();
    let r = assert_parity(ctx, "auto", &q, &k, &v, &auto, Tolerance::F32);
    assert_eq!(r.plan.path, "fused-subgroup", "{}", r.plan.reason);
    assert!(r.plan.reason.contains("16-key blocks"), "{}", r.plan.reason);
}

/// Grouped-query attention over batches, and masks of each kind with and without a causal
/// rule (a bool mask broadcast over batch and heads, one per element, and additive masks
/// with and without -inf).
fn gqa_and_masks(ctx: &Context) {
    let mut rng = Rng::new(162);
    let (q, k, v) = inputs(&mut rng, [2, 6, 2, 45, 70, 64, 64], 1.0);
    for causal in [Causal::None, Causal::BottomRight] {
        assert_parity(
            ctx,
            "GQA 6/2",
            &q,
            &k,
            &v,
            &subgroup(causal),
            Tolerance::F32,
        );
    }
    let bools = [
        rng.bool_array(&[45, 70], 0.6),
        rng.bool_array(&[2, 6, 45, 70], 0.7),
    ];
    for m in &bools {
        for causal in [Causal::None, Causal::TopLeft] {
            let opts = subgroup(causal).mask(Mask::Bool(m.view()));
            let what = format!("bool {:?} {causal:?}", m.shape());
            assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        }
    }
    let bias = rng.array(&[6, 45, 70], 2.0);
    let mut holes = bias.clone();
    holes.iter_mut().enumerate().for_each(|(i, x)| {
        if i % 7 == 0 {
            *x = f32::NEG_INFINITY;
        }
    });
    for (name, m) in [("bias", &bias), ("bias with -inf", &holes)] {
        let opts = subgroup(Causal::None).mask(Mask::Additive(m.view()));
        assert_parity(ctx, name, &q, &k, &v, &opts, Tolerance::F32);
    }
}

/// Logits of order 1e3 (the allowance of assert_parity_conditioned), and rows with no key
/// they may see: bottom-right with Lq > Lk, and a mask row of false, which must give zeros
/// and an LSE of -inf.
fn large_logits_and_empty_rows(ctx: &Context) {
    let mut rng = Rng::new(163);
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 65, 129, 64, 64], 50.0);
    for causal in [Causal::None, Causal::BottomRight] {
        let opts = AttentionOptions::default()
            .causal(causal)
            .path(PathChoice::FusedSubgroup);
        assert_parity_conditioned(ctx, &format!("x50 {causal:?}"), &q, &k, &v, &opts);
    }
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 40, 30, 64, 64], 1.0);
    let mut mask = rng.bool_array(&[40, 30], 0.5);
    mask.slice_mut(ndarray::s![15, ..]).fill(false);
    let opts = subgroup(Causal::BottomRight).mask(Mask::Bool(mask.view()));
    let r = assert_parity(ctx, "empty rows", &q, &k, &v, &opts, Tolerance::F32);
    let lse = r.lse.expect("lse");
    for i in (0..10).chain([15]) {
        assert_eq!(lse[[0, 1, i]], f32::NEG_INFINITY, "row {i}");
        assert!(
            (0..64).all(|c| r.out[[0, 1, i, c]] == 0.0),
            "row {i} must be zeros"
        );
    }
}

/// D or Dv above 128: the wide variant in 16-key blocks. One specialisation (R = 4; its
/// pipeline compiles in about 10 s on lavapipe at 512 bits), also used by loop_limit.
fn wide_variant(ctx: &Context) {
    let mut rng = Rng::new(164);
    for (lq, lk) in [(1, 300), (37, 17), (70, 129)] {
        let (q, k, v) = inputs(&mut rng, [1, 2, 1, lq, lk, 16, 129], 1.0);
        let what = format!("D16 Dv129 Lq{lq} Lk{lk}");
        assert_parity(
            ctx,
            &what,
            &q,
            &k,
            &v,
            &subgroup(Causal::BottomRight),
            Tolerance::F32,
        );
    }
}

/// Each variant at the most keys one pass may take on llvmpipe (crate::loops, in 16-key
/// blocks here), then one block past it, which takes two key ranges and a merge. The
/// standard variant's limit (one iteration a block: 1 040 368 keys) needs narrow rows to fit
/// one storage binding (128 MiB on lavapipe), hence D = Dv = 4. One kv head per thread of
/// the adapter, so that its row blocks keep every thread busy and the keys are not split
/// for that (fused::subgroup_splits): one invocation then runs all the keys at the limit.
/// The wide variant takes one iteration a block too since its loops over D unroll, so a V of
/// width 132 fills its binding first (about 127 000 keys over two kv heads): it runs that
/// many in one pass, which would cross the limit at 9 iterations a block or more.
fn loop_limit(ctx: &Context) {
    let mut rng = Rng::new(165);
    let threads = wgpu_attention::fused::cpu_adapter_threads();
    let opts = subgroup(Causal::BottomRight);
    let at_limit = ((LLVMPIPE_LOOP_LIMIT - SLACK) / subgroup_block()) as usize * 16;
    for (lk, passes) in [(at_limit, None), (at_limit + 16, Some("in 2 key ranges"))] {
        let (q, k, v) = inputs(&mut rng, [1, 2 * threads, threads, 5, lk, 4, 4], 1.0);
        let what = format!("D4 Dv4 Lk{lk}");
        let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        match passes {
            None => assert!(!r.plan.reason.contains("merged"), "{}", r.plan.reason),
            Some(p) => assert!(
                r.plan.reason.contains(p) && r.plan.reason.contains("loop limit"),
                "{}",
                r.plan.reason
            ),
        }
    }
    let lk = common::keys_in_a_binding(ctx, threads, 132, 16);
    assert!(lk as u64 / 16 * 9 > LLVMPIPE_LOOP_LIMIT, "{lk} keys");
    let (q, k, v) = inputs(&mut rng, [1, 2 * threads, threads, 5, lk, 16, 129], 1.0);
    let what = format!("D16 Dv129 Lk{lk} (the wide variant)");
    let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
    assert!(!r.plan.reason.contains("merged"), "{}", r.plan.reason);
}

/// The 16-key kernels read K and V from textures that each call fills from the K/V windows
/// (fused::reads_textures); a context whose textures cannot hold a row of
/// fused::KV_TEXTURE_WIDTH texels takes the storage-buffer form instead. Both forms against
/// the reference on GQA with a mask and a causal rule, widths that need padding, the wide
/// variant and large logits (the cases above ran the texture form); the plan says which
/// form ran; a causal rule that hides half the keys from every row takes the buffer form;
/// and the memory estimate counts the textures: whole units of 4 rows of 4096 texels for
/// each of K and V.
fn texture_and_buffer_forms(ctx: &Context) {
    use wgpu_attention::fused::{kv_textures_available, Tier, KV_TEXTURE_WIDTH};
    assert!(
        kv_textures_available(ctx, Tier::Subgroup),
        "{:?}",
        ctx.limits()
    );
    let buffers = common::ctx_without_textures(true);
    let mut rng = Rng::new(166);
    let (q, k, v) = inputs(&mut rng, [2, 6, 2, 45, 70, 64, 64], 1.0);
    let mask = rng.bool_array(&[2, 6, 45, 70], 0.7);
    let (q2, k2, v2) = inputs(&mut rng, [1, 2, 2, 37, 15, 5, 63], 1.0);
    let (q3, k3, v3) = inputs(&mut rng, [1, 2, 1, 37, 300, 16, 129], 1.0);
    for (c, textures) in [(ctx, true), (&buffers, false)] {
        let form = if textures { "textures" } else { "buffers" };
        let opts = subgroup(Causal::BottomRight).mask(Mask::Bool(mask.view()));
        let r = assert_parity(
            c,
            &format!("{form}: GQA, mask"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
        assert_eq!(
            r.plan.reason.contains("K/V copied into textures"),
            textures,
            "{form}: {}",
            r.plan.reason
        );
        assert!(r.plan.reason.contains("16-key blocks"), "{}", r.plan.reason);
        let opts = subgroup(Causal::TopLeft);
        assert_parity(
            c,
            &format!("{form}: D5 Dv63"),
            &q2,
            &k2,
            &v2,
            &opts,
            Tolerance::F32,
        );
        let opts = subgroup(Causal::None);
        assert_parity(
            c,
            &format!("{form}: wide"),
            &q3,
            &k3,
            &v3,
            &opts,
            Tolerance::F32,
        );
        let opts = AttentionOptions::default().path(PathChoice::FusedSubgroup);
        let what = format!("{form}: x50");
        assert_parity_conditioned(c, &what, &q3.mapv(|x| 50.0 * x), &k3, &v3, &opts);
    }
    // Top-left with Lq < Lk / 2: no row sees the second half of the keys, so the copy would
    // not pay (fused::kv_textures_pay_off) and the buffer form runs; from Lq = Lk / 2, and
    // bottom-right (the last row sees every key), the textures.
    for (lq, causal, textures) in [
        (149, Causal::TopLeft, false),
        (150, Causal::TopLeft, true),
        (20, Causal::BottomRight, true),
    ] {
        let (q, k, v) = inputs(&mut rng, [1, 2, 2, lq, 300, 32, 32], 1.0);
        let what = format!("Lq{lq} Lk300 {causal:?}");
        let r = assert_parity(ctx, &what, &q, &k, &v, &subgroup(causal), Tolerance::F32);
        assert_eq!(
            r.plan.reason.contains("K/V copied into textures"),
            textures,
            "{what}: {}",
            r.plan.reason
        );
    }
    // 2 kv heads x 1000 keys x 64 floats = 512 000 bytes each of K and V: 8 rows of 64 KiB
    // (two units of 4 rows).
    let opts = subgroup(Causal::None);
    let (sq, sk) = ([1, 2, 1000, 64], [1, 2, 1000, 64]);
    let (with, _) = memory_estimate(ctx, &sq, &sk, &sk, &opts).expect("estimate");
    let (without, _) = memory_estimate(&buffers, &sq, &sk, &sk, &opts).expect("estimate");
    let row_bytes = 16 * u64::from(KV_TEXTURE_WIDTH);
    assert_eq!(
        with.scratch - without.scratch,
        2 * 8 * row_bytes,
        "{with} / {without}"
    );
}

/// f16 and bfloat16 K and V through the 16-key kernels: copied into 16-bit textures
/// (rgba16float for f16, rg32uint for bf16: `fused::kernels::SUBGROUP_TEXTURE_16_BF16` and its
/// wide twin) and read from there, not widened first. The output is f16 (bf16), so the rule
/// is tests/suite/f16.rs's: at most twice the error of rounding the exact result (the reference
/// on the widened inputs) to the format.
fn half_textures(ctx: &Context) {
    use half::{bf16, f16};
    use ndarray::ArrayD;
    use wgpu_attention::fp16::{attention_bf16, attention_f16};
    let mut rng = Rng::new(168);
    let max_err =
        |got: &ArrayD<f32>, exact: &ArrayD<f32>| common::max_abs_err(got.iter().copied(), exact);
    // The shapes and options of texture_and_buffer_forms, so that f16 reuses its pipelines
    // (512-bit pipelines take long to compile): a bool mask with GQA, and the wide variant
    // (Dv 132, which the f32 case reaches by padding 129).
    let mask = rng.bool_array(&[2, 6, 45, 70], 0.7);
    for (shape, masked) in [
        ([2, 6, 2, 45, 70, 64, 64], true),
        ([1, 2, 1, 37, 300, 16, 132], false),
    ] {
        let [b, hq, hkv, lq, lk, d, dv] = shape;
        let (q, k, v) = (
            rng.array(&[b, hq, lq, d], 1.0),
            rng.array(&[b, hkv, lk, d], 1.0),
            rng.array(&[b, hkv, lk, dv], 1.0),
        );
        let opts = if masked {
            subgroup(Causal::BottomRight).mask(Mask::Bool(mask.view()))
        } else {
            subgroup(Causal::None)
        };
        let to_f16 = |x: f32| f16::from_f32(x).to_f32();
        let to_bf16 = |x: f32| bf16::from_f32(x).to_f32();
        for (format, round) in [("f16", &to_f16 as &dyn Fn(f32) -> f32), ("bf16", &to_bf16)] {
            let what = format!("{format} {shape:?}");
            let (qr, kr, vr) = (q.mapv(round), k.mapv(round), v.mapv(round));
            let exact = wgpu_attention::reference::attention(&qr, &kr, &vr, &opts)
                .expect("reference")
                .out;
            // The 16-bit call, its output widened back to f32.
            let (out, plan) = if format == "f16" {
                let r = attention_f16(
                    ctx,
                    &qr.mapv(f16::from_f32),
                    &kr.mapv(f16::from_f32),
                    &vr.mapv(f16::from_f32),
                    &opts,
                )
                .expect(&what);
                (r.out.mapv(f16::to_f32), r.plan)
            } else {
                let r = attention_bf16(
                    ctx,
                    &qr.mapv(bf16::from_f32),
                    &kr.mapv(bf16::from_f32),
                    &vr.mapv(bf16::from_f32),
                    &opts,
                )
                .expect(&what);
                (r.out.mapv(bf16::to_f32), r.plan)
            };
            let reason = &plan.reason;
            assert!(
                reason.contains(&format!("K/V read as {format}"))
                    && reason.contains("K/V copied into textures")
                    && reason.contains("16-key blocks"),
                "{what}: {reason}"
            );
            let (cpu, gpu) = (max_err(&exact.mapv(round), &exact), max_err(&out, &exact));
            assert!(
                gpu <= 2.0 * cpu + 1e-7,
                "{what}: GPU error {gpu:e} > 2 x the CPU's {format} error {cpu:e}"
            );
        }
    }
}
