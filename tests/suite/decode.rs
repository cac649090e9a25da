//! The decode path (split-K with a merge kernel) against the reference, and the public
//! merge of partial results.

use crate::common;

use common::{assert_parity, inputs, Rng};
use ndarray::{s, ArrayD};
use wgpu_attention::decode::Form;
use wgpu_attention::merge::merge_partials;
use wgpu_attention::{
    reference, AttentionOptions, Causal, Context, ContextOptions, Mask, PathChoice, Tolerance,
};

/// Both ways to force decode: the form for the adapter, and the workgroup form (the GPU
/// form, which on CPU adapters runs only when forced, so these tests are where lavapipe
/// checks it).
const FORMS: [PathChoice; 2] = [PathChoice::Decode, PathChoice::DecodeWorkgroup];

/// The path name a forced decode reports on this adapter.
fn decode_name(ctx: &Context, choice: PathChoice) -> &'static str {
    match choice {
        PathChoice::DecodeWorkgroup => Form::Workgroup.path_name(),
        _ => Form::for_adapter(ctx.adapter_info()).path_name(),
    }
}

#[test]
fn decode_shapes_and_alignments() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(51);
    // (B, Hq, Hkv, Lq, Lk, D, Dv): GQA groups, Lq from 1 to 5 and above Lk, Lk not a
    // multiple of the split; 3 to 20 query rows per kv head: one tile of each size the
    // invocation form takes up to its most (16), and two tiles of 10. The 16-row tile at
    // small widths: at D = 128 its pipeline takes about a minute to compile on lavapipe
    // (decode::MAX_TILE_ROWS), against seconds at D = 32.
    let shapes = [
        [1, 8, 2, 1, 1000, 64, 64],
        [2, 4, 4, 3, 301, 16, 8],
        [1, 6, 3, 2, 77, 128, 128],
        [1, 4, 1, 5, 4, 16, 16],
        [1, 16, 1, 1, 2049, 32, 48],
    ];
    for shape in shapes {
        let (q, k, v) = inputs(&mut rng, shape, 1.0);
        for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
            for form in FORMS {
                let opts = AttentionOptions::default()
                    .causal(causal)
                    .path(form)
                    .with_lse();
                let r = assert_parity(
                    &ctx,
                    &format!("{form:?} {shape:?} {causal:?}"),
                    &q,
                    &k,
                    &v,
                    &opts,
                    Tolerance::F32,
                );
                assert_eq!(r.plan.path, decode_name(&ctx, form));
            }
        }
    }
}

#[test]
fn decode_masks_large_logits_and_empty_rows() {
    let Some(ctx) = common::ctx() else { return };
    for form in FORMS {
        masks_large_logits_and_empty_rows(&ctx, form);
    }
}

fn masks_large_logits_and_empty_rows(ctx: &Context, form: PathChoice) {
    let mut rng = Rng::new(52);
    let (q, k, v) = inputs(&mut rng, [2, 4, 2, 3, 500, 16, 8], 1.0);
    let bool_mask = rng.bool_array(&[2, 4, 3, 500], 0.5);
    let mut empty = bool_mask.clone();
    empty.slice_mut(s![1, 2, 1, ..]).fill(false);
    let bias = rng.array(&[3, 500], 3.0);
    for (name, mask) in [
        ("bool", Mask::Bool(bool_mask.view())),
        ("empty row", Mask::Bool(empty.view())),
        ("bias", Mask::Additive(bias.view())),
    ] {
        let opts = AttentionOptions::default().mask(mask).path(form).with_lse();
        let r = assert_parity(
            ctx,
            &format!("{form:?} {name}"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
        if name == "empty row" {
            assert_eq!(r.lse.expect("lse")[[1, 2, 1]], f32::NEG_INFINITY);
        }
    }
    // Bottom-right with Lq > Lk: the first rows see no key at all.
    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 9, 4, 16, 8], 1.0);
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .path(form)
        .with_lse();
    let what = format!("{form:?} Lq > Lk");
    let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
    assert_eq!(r.lse.expect("lse")[[0, 0, 0]], f32::NEG_INFINITY);
    let (q, k, v) = inputs(&mut rng, [1, 8, 2, 1, 700, 64, 64], 50.0);
    let opts = AttentionOptions::default().path(form);
    common::assert_parity_conditioned(ctx, &format!("{form:?} x50"), &q, &k, &v, &opts);
    // 7 rows per kv head: one invocation of 8 rows (decode::invocation_tile_rows), each
    // row with its own running max.
    let (q, k, v) = inputs(&mut rng, [1, 14, 2, 1, 700, 64, 64], 50.0);
    common::assert_parity_conditioned(ctx, &format!("{form:?} x50, 7 rows"), &q, &k, &v, &opts);
}

#[test]
fn decode_under_small_limits() {
    let Some(base) = common::ctx() else { return };
    let mut limits = base.limits();
    limits.max_storage_buffer_binding_size = 1 << 16;
    limits.min_storage_buffer_offset_alignment = 256;
    limits.max_compute_workgroups_per_dimension = 3;
    let ctx = Context::with_options(&ContextOptions {
        limits: Some(limits),
        ..common::context_options()
    })
    .expect("ctx");
    let mut rng = Rng::new(53);
    // The second shape: Dv 320, several output columns an invocation in the workgroup form
    // (one kv head of V, 40 x 320 floats, fits the 64 KiB binding).
    for shape in [[2, 8, 4, 2, 600, 16, 8], [2, 4, 2, 2, 40, 16, 320]] {
        let (q, k, v) = inputs(&mut rng, shape, 1.0);
        for form in FORMS {
            let opts = AttentionOptions::default()
                .causal(Causal::BottomRight)
                .path(form)
                .with_lse();
            let what = format!("{form:?} {shape:?} small limits");
            let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
            assert!(
                r.plan.chunks > 1,
                "{what}: expected splitting, got {}",
                r.plan.chunks
            );
        }
    }
}

#[test]
fn planner_picks_decode_for_few_rows() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(54);
    let (q, k, v) = inputs(&mut rng, [1, 32, 8, 1, 4096, 128, 128], 1.0);
    let r = assert_parity(
        &ctx,
        "decode Hq32 Hkv8 Lk4096",
        &q,
        &k,
        &v,
        &AttentionOptions::default().with_lse(),
        Tolerance::F32,
    );
    assert_eq!(
        r.plan.path,
        decode_name(&ctx, PathChoice::Decode),
        "{}",
        r.plan.reason
    );
}

/// Rows per kv head up to which auto takes decode: 16 on GPUs, fewer on CPU adapters whose
/// subgroup tier serves a GQA group's heads from one K/V load (8 at 8 lanes, 16 there from 2048 keys,
/// 4 at 16; the 16-lane case runs in tests/lanes16.rs). Either way the answer matches the
/// reference.
#[test]
fn decode_rows_follow_the_adapter() {
    use wgpu_attention::decode::{auto_rows, is_decode_shape, MAX_AUTO_ROWS};
    use wgpu_attention::fused::{subgroup_keys, tier_obstacle, Tier};
    assert_eq!(auto_rows(None), MAX_AUTO_ROWS);
    assert_eq!(auto_rows(Some(8)), 8);
    assert_eq!(auto_rows(Some(16)), 4);
    assert!(is_decode_shape(8, 256, 8) && !is_decode_shape(9, 256, 8));
    assert!(!is_decode_shape(4, 255, 8));
    // The tool keeps 8 lanes for what decode takes at 16 lanes, and for up to 8 rows per
    // kv head from 1024 keys (decode at 8 lanes beat the subgroup tier at 16 there).
    assert!(!wgpu_attention::cpu_vectors::suits_wide(4, 4096, 128, 128));
    assert!(!wgpu_attention::cpu_vectors::suits_wide(4, 256, 128, 128));
    assert!(!wgpu_attention::cpu_vectors::suits_wide(5, 1024, 128, 128));
    assert!(!wgpu_attention::cpu_vectors::suits_wide(8, 4096, 64, 64));
    assert!(wgpu_attention::cpu_vectors::suits_wide(5, 1023, 128, 128));
    assert!(wgpu_attention::cpu_vectors::suits_wide(8, 256, 64, 64));
    assert!(wgpu_attention::cpu_vectors::suits_wide(9, 2047, 128, 128));
    assert!(wgpu_attention::cpu_vectors::suits_wide(17, 4096, 128, 128));
    assert!(wgpu_attention::cpu_vectors::suits_wide(9, 4096, 132, 132));
    // From 2048 keys decode at 8 lanes takes up to 16 rows of widths up to 128 in one tile
    // (decode::EIGHT_LANE_GROUP_MIN_KEYS).
    assert!(!wgpu_attention::cpu_vectors::suits_wide(9, 2048, 128, 128));
    assert!(!wgpu_attention::cpu_vectors::suits_wide(16, 4096, 64, 64));
    use wgpu_attention::decode::auto_rows_at;
    assert_eq!(auto_rows_at(Some(8), 128, 2048), MAX_AUTO_ROWS);
    assert_eq!(auto_rows_at(Some(8), 128, 2047), 8);
    assert_eq!(auto_rows_at(Some(8), 132, 4096), 8);
    assert_eq!(auto_rows_at(Some(16), 128, 4096), 4);
    assert_eq!(auto_rows_at(None, 128, 256), MAX_AUTO_ROWS);
    assert!(!wgpu_attention::cpu_vectors::suits_wide(5, 4096, 160, 160));
    assert!(wgpu_attention::cpu_vectors::suits_wide(5, 4096, 260, 260));
    // Above 256 decode's workgroup form takes up to 2 rows per kv head at 8 lanes; the
    // subgroup tier, at 16, the rest up to its 640; wider stays at 8 lanes.
    assert!(!wgpu_attention::cpu_vectors::suits_wide(2, 4096, 576, 512));
    assert!(wgpu_attention::cpu_vectors::suits_wide(3, 4096, 576, 512));
    assert!(wgpu_attention::cpu_vectors::suits_wide(2, 100, 576, 512));
    assert!(!wgpu_attention::cpu_vectors::suits_wide(64, 4096, 644, 64));

    let Some(ctx) = common::ctx() else { return };
    let cpu_subgroups = ctx.adapter_info().device_type == wgpu::DeviceType::Cpu
        && tier_obstacle(&ctx, Tier::Subgroup).is_none();
    let lanes = subgroup_keys(ctx.adapter_info());
    let mut rng = Rng::new(56);
    // Hq 16 over Hkv 4 (4 heads a group) with Lq 1, 2 and 3: 4, 8 and 12 rows per kv head
    // over 300 keys, and 12 and 16 over 2100 (decode at 8 lanes from 2048 keys).
    for (lq, lk) in [(1, 300), (2, 300), (3, 300), (3, 2100), (4, 2100)] {
        let rows = 4 * lq;
        let (q, k, v) = inputs(&mut rng, [1, 16, 4, lq, lk, 32, 32], 1.0);
        let opts = AttentionOptions::default()
            .causal(Causal::BottomRight)
            .with_lse();
        let what = format!("{rows} rows per kv head over {lk} keys");
        let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        let max_rows = if cpu_subgroups {
            auto_rows_at(Some(lanes), 32, lk)
        } else {
            MAX_AUTO_ROWS
        };
        // Past max_rows only on CPU adapters (every case here is within MAX_AUTO_ROWS).
        let want = if rows <= max_rows {
            decode_name(&ctx, PathChoice::Decode)
        } else {
            "fused-subgroup"
        };
        assert_eq!(r.plan.path, want, "{what}: {}", r.plan.reason);
        // The invocation form takes the whole group in one tile.
        if r.plan.path == "decode" {
            let tile = format!("; {rows} query rows an invocation,");
            assert!(r.plan.reason.contains(&tile), "{what}: {}", r.plan.reason);
        }
    }
}

/// D or Dv above 128 (up to 256) on the decode kernel's wide variant: a Gemma-like GQA
/// shape (head dimension 256), padded widths, both causal alignments, a mask with an empty
/// row. One rule per shape: each is a pipeline that lavapipe compiles in 10-30 s.
#[test]
fn decode_widths_above_128() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(55);
    let (q, k, v) = inputs(&mut rng, [1, 16, 8, 1, 1000, 256, 256], 1.0);
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .with_lse();
    let r = assert_parity(&ctx, "decode D256 auto", &q, &k, &v, &opts, Tolerance::F32);
    // Auto takes decode for these widths on every adapter (on an H200 at D = 256: 1.0 ms,
    // the unfused path 1.75).
    let adapter_form = decode_name(&ctx, PathChoice::Decode);
    assert_eq!(r.plan.path, adapter_form, "{}", r.plan.reason);
    for form in FORMS {
        let opts = opts.clone().path(form);
        let what = format!("{form:?} D256");
        let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        assert_eq!(r.plan.path, decode_name(&ctx, form));
    }

    let (q, k, v) = inputs(&mut rng, [1, 2, 2, 3, 77, 130, 250], 1.0);
    let (q2, k2, v2) = inputs(&mut rng, [2, 4, 2, 3, 301, 200, 8], 1.0);
    let mut allow = rng.bool_array(&[2, 4, 3, 301], 0.6);
    allow.slice_mut(s![1, 2, 1, ..]).fill(false);
    for form in FORMS {
        let opts = AttentionOptions::default()
            .causal(Causal::TopLeft)
            .path(form)
            .with_lse();
        let what = format!("{form:?} D130 Dv250");
        let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        assert_eq!(r.out.shape(), &[1, 2, 3, 250]);

        let opts = AttentionOptions::default()
            .mask(Mask::Bool(allow.view()))
            .path(form)
            .with_lse();
        let what = format!("{form:?} D200 Dv8 masked");
        let r = assert_parity(&ctx, &what, &q2, &k2, &v2, &opts, Tolerance::F32);
        assert_eq!(r.lse.expect("lse")[[1, 2, 1]], f32::NEG_INFINITY);
    }
}

/// Above 256, only decode's workgroup form takes the widths (up to 4096, `decode::
/// WORKGROUP_MAX_WIDTH`): forcing either form runs it, and auto takes it for decode shapes on
/// every adapter (on CPU adapters that run the subgroup tier up to
/// `decode::CPU_WIDE_DECODE_ROWS` rows per kv head, that tier past them; on other CPU
/// adapters up to `decode::CPU_WIDE_AUTO_LQ` query positions, the unfused path past them).
/// Above Dv = 256 each invocation owns several output
/// columns (`decode::workgroup_cols`) and a tile holds 16 / cols rows: Dv 320 and 512 (2
/// columns, 8 rows a tile), 1000 (4 columns, the last one only partly below Dv/4; 4 rows a
/// tile), 4096 (16 columns, one row a tile); padded widths (D 333, Dv 257); GQA; both causal alignments; a
/// mask with an empty row; large logits. Past 4096 every decode form refuses.
#[test]
fn decode_widths_above_256() {
    use wgpu_attention::decode::{
        workgroup_cols, CPU_WIDE_AUTO_LQ, CPU_WIDE_DECODE_ROWS, WORKGROUP_MAX_WIDTH,
    };
    use wgpu_attention::fused::{tier_obstacle, Tier};
    assert_eq!(WORKGROUP_MAX_WIDTH, 4096);
    let cols = [256, 260, 320, 512, 516, 1000, 4096].map(workgroup_cols);
    assert_eq!(cols, [1, 2, 2, 2, 3, 4, 16]);

    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(60);
    // (shape, rows a tile)
    let cases = [
        ([1, 4, 1, 3, 300, 320, 64], 12),
        ([1, 2, 2, 5, 301, 64, 320], 5),
        ([1, 8, 2, 4, 500, 512, 512], 8),
        ([2, 2, 1, 3, 130, 36, 1000], 3),
        ([1, 1, 1, 2, 70, 333, 257], 2),
        ([1, 1, 1, 2, 100, 4096, 4096], 1),
    ];
    let runs = [
        (Causal::TopLeft, PathChoice::Decode),
        (Causal::BottomRight, PathChoice::DecodeWorkgroup),
    ];
    for (shape, tile) in cases {
        workgroup_tiles_with_masks(&ctx, &mut rng, shape, tile, &runs);
    }

    // Large logits at Dv 512.
    let (q, k, v) = inputs(&mut rng, [1, 4, 2, 1, 400, 512, 512], 50.0);
    let opts = AttentionOptions::default().path(PathChoice::Decode);
    common::assert_parity_conditioned(&ctx, "decode D512 x50", &q, &k, &v, &opts);

    // Auto: decode for few rows over many keys. On CPU adapters that run the subgroup tier,
    // whose wide variant takes widths up to 640, decode up to CPU_WIDE_DECODE_ROWS rows per
    // kv head and that tier past them; on other CPU adapters decode up to CPU_WIDE_AUTO_LQ
    // query positions whatever the group (16 query heads over one kv head here) and the
    // unfused path past them; on GPUs decode up to 16 rows per kv head.
    let on_cpu = ctx.adapter_info().device_type == wgpu::DeviceType::Cpu;
    let subgroup = tier_obstacle(&ctx, Tier::Subgroup).is_none();
    for (hq, lq) in [
        (2, 1),
        (1, CPU_WIDE_DECODE_ROWS + 1),
        (2, CPU_WIDE_AUTO_LQ),
        (16, 1),
        (1, CPU_WIDE_AUTO_LQ + 1),
    ] {
        let (q, k, v) = inputs(&mut rng, [1, hq, 1, lq, 300, 384, 384], 1.0);
        let opts = AttentionOptions::default().causal(Causal::BottomRight);
        let what = format!("auto D384 Hq{hq} Hkv1 Lq{lq}");
        let r = assert_parity(&ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        let want = match (on_cpu, subgroup) {
            (true, true) if hq * lq > CPU_WIDE_DECODE_ROWS => "fused-subgroup",
            (true, false) if lq > CPU_WIDE_AUTO_LQ => "unfused",
            _ => "decode-workgroup",
        };
        assert_eq!(r.plan.path, want, "{what}: {}", r.plan.reason);
    }

    // Past the widest: refused with the limit, by both forms.
    let (q, k, v) = inputs(&mut rng, [1, 1, 1, 1, 8, 8, 4100], 1.0);
    for form in FORMS {
        let opts = AttentionOptions::default().path(form);
        let e = wgpu_attention::attention(&ctx, &q, &k, &v, &opts).expect_err("too wide");
        assert!(e.to_string().contains("at most"), "{form:?}: {e}");
    }
}

/// The workgroup form takes up to 16 rows a workgroup: more rows than that (forced decode
/// on longer queries) run in tiles, the rows spread evenly over them, and the surplus slots
/// of the last tile are not written. 36 rows: 3 tiles of 12; 40 rows: 3 tiles of 14 (the
/// last one holds 12). With both causal alignments and a mask with an empty row.
#[test]
fn decode_workgroup_tiles_rows() {
    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(59);
    let runs = [
        (Causal::TopLeft, PathChoice::DecodeWorkgroup),
        (Causal::BottomRight, PathChoice::DecodeWorkgroup),
    ];
    for (shape, tile) in [
        ([1, 4, 1, 9, 300, 64, 64], 12),
        ([2, 1, 1, 40, 130, 20, 36], 14),
    ] {
        workgroup_tiles_with_masks(&ctx, &mut rng, shape, tile, &runs);
    }
}

/// Forced decode on `shape` for each (causal rule, path choice) of `runs`, all of which run
/// the workgroup form in tiles of `tile` rows: parity without a mask, then with a bool mask
/// whose last row is empty (its LSE is -inf).
fn workgroup_tiles_with_masks(
    ctx: &Context,
    rng: &mut Rng,
    shape: [usize; 7],
    tile: usize,
    runs: &[(Causal, PathChoice)],
) {
    let [b, hq, _, lq, lk, ..] = shape;
    let (q, k, v) = inputs(rng, shape, 1.0);
    let mut allow = rng.bool_array(&[b, hq, lq, lk], 0.7);
    allow.slice_mut(s![b - 1, hq - 1, lq - 1, ..]).fill(false);
    for &(causal, form) in runs {
        let opts = AttentionOptions::default()
            .causal(causal)
            .path(form)
            .with_lse();
        let what = format!("{form:?} {shape:?} {causal:?}");
        let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        assert_eq!(r.plan.path, "decode-workgroup", "{what}");
        let text = format!("tile of {tile} rows");
        assert!(r.plan.reason.contains(&text), "{text}: {}", r.plan.reason);
        let opts = opts.mask(Mask::Bool(allow.view()));
        let what = format!("{what} masked");
        let r = assert_parity(ctx, &what, &q, &k, &v, &opts, Tolerance::F32);
        assert_eq!(
            r.lse.expect("lse")[[b - 1, hq - 1, lq - 1]],
            f32::NEG_INFINITY
        );
    }
}

/// The partial kernel reads K and V as 64-bit words on CPU adapters with 8-lane subgroups
/// and `Features::SHADER_INT64` (what lavapipe runs at 256 bits) and as vec4<f32> elsewhere
/// (GPUs, lavapipe at 512 bits).
/// The other tests run the first form here; this one runs the second on the same adapter,
/// on a context without the feature: every causal rule, a mask with an empty row, large
/// logits, and the wide variant.
#[test]
fn decode_reads_k_and_v_as_vec4_without_int64() {
    let Some(ctx) = common::ctx() else { return };
    if Form::for_adapter(ctx.adapter_info()) != Form::Invocation {
        eprintln!("a GPU: decode runs its workgroup form, which reads K and V as vec4<f32>");
        return;
    }
    let words = wgpu_attention::cpu_vectors::kv_words(&ctx);
    let mut rng = Rng::new(57);
    let (q, k, v) = inputs(&mut rng, [1, 8, 2, 1, 1000, 64, 64], 1.0);
    let r = assert_parity(
        &ctx,
        "decode, default features",
        &q,
        &k,
        &v,
        &AttentionOptions::default().path(PathChoice::Decode),
        Tolerance::F32,
    );
    let form = if words {
        "K/V read as 64-bit words"
    } else {
        "K/V read as vec4<f32>"
    };
    assert!(r.plan.reason.contains(form), "{}", r.plan.reason);

    common::vec4_load_cases(
        &common::ctx_without_int64(),
        PathChoice::Decode,
        [1, 8, 2, 1, 1000, 64, 64],
        [1, 2, 2, 3, 77, 130, 250],
        &|plan| {
            assert!(
                plan.reason.contains("K/V read as vec4<f32>"),
                "{}",
                plan.reason
            )
        },
    );
}

/// How decode splits the keys: in the invocation form (CPU adapters) as few splits as give
/// every thread two workgroups of the partial kernel; in the workgroup form (GPUs) whole
/// 64-key blocks, as many splits as bring the dispatch to its target.
#[test]
fn decode_splits_follow_the_adapter() {
    use wgpu_attention::decode::{split_for_threads, workgroup_split, Split, WORKGROUP_TARGET};
    let split = |keys_per_split, splits| Split {
        keys_per_split,
        splits,
    };
    // B1 Hq32 Hkv8 Lq1 on 2 threads: 8 invocations a split, 256 wanted, so 32 splits.
    assert_eq!(split_for_threads(4096, usize::MAX, 8, 2), split(128, 32));
    // Enough groups for every thread: one split; past the loop limit's cap, more.
    assert_eq!(split_for_threads(4096, usize::MAX, 512, 2), split(4096, 1));
    assert_eq!(split_for_threads(4096, 1968, 512, 2), split(1968, 3));
    // Few keys: at least 16 a split.
    assert_eq!(split_for_threads(300, usize::MAX, 1, 2), split(16, 19));
    assert_eq!(split_for_threads(4, usize::MAX, 1, 16), split(16, 1));
    // A machine with more threads takes more splits.
    assert_eq!(split_for_threads(4096, usize::MAX, 8, 16), split(16, 256));
    // The workgroup form: whole 64-key blocks, one a split until the dispatch reaches its
    // target; then more blocks a split, up to the cap.
    assert_eq!(workgroup_split(4096, 8, usize::MAX, 2048), split(64, 64));
    assert_eq!(workgroup_split(4096, 128, usize::MAX, 2048), split(256, 16));
    assert_eq!(
        workgroup_split(4096, 4096, usize::MAX, 2048),
        split(4096, 1)
    );
    assert_eq!(workgroup_split(4096, 4096, 1000, 2048), split(960, 5));
    assert_eq!(workgroup_split(100, 1, usize::MAX, 2048), split(64, 2));
    assert_eq!(workgroup_split(4096, 8, usize::MAX, 4), split(4096, 1));

    let Some(ctx) = common::ctx() else { return };
    let mut rng = Rng::new(58);
    let (q, k, v) = inputs(&mut rng, [1, 32, 8, 1, 4096, 16, 16], 1.0);
    let opts = AttentionOptions::default().path(PathChoice::Decode);
    let r = assert_parity(&ctx, "decode splits", &q, &k, &v, &opts, Tolerance::F32);
    let want = if Form::for_adapter(ctx.adapter_info()) == Form::Workgroup {
        workgroup_split(4096, 8, usize::MAX, WORKGROUP_TARGET)
    } else {
        split_for_threads(
            4096,
            usize::MAX,
            8,
            wgpu_attention::fused::cpu_adapter_threads(),
        )
    };
    let text = format!("{} key splits of {} keys", want.splits, want.keys_per_split);
    assert!(r.plan.reason.contains(&text), "{text}: {}", r.plan.reason);
}

/// Attention over the union of two key shards equals the merge of attention over each.
#[test]
fn merging_shards_equals_attention_over_all_keys() {
    let mut rng = Rng::new(55);
    let (q, k, v) = inputs(&mut rng, [1, 2, 1, 5, 40, 8, 6], 1.0);
    let mask = rng.bool_array(&[5, 40], 0.6);
    let all = reference::attention(
        &q,
        &k,
        &v,
        &AttentionOptions::default()
            .mask(Mask::Bool(mask.view()))
            .with_lse(),
    )
    .expect("ref");
    let mut parts = Vec::new();
    for (lo, hi) in [(0, 13), (13, 40)] {
        let ks = k.slice(s![.., .., lo..hi, ..]).into_dyn();
        let vs = v.slice(s![.., .., lo..hi, ..]).into_dyn();
        let ms = mask.slice(s![.., lo..hi]);
        let opts = AttentionOptions::default()
            .mask(Mask::Bool(ms.into_dyn()))
            .with_lse();
        let r = reference::attention(&q, &ks, &vs, &opts).expect("shard");
        parts.push((r.out, r.lse.expect("lse")));
    }
    let views: Vec<_> = parts.iter().map(|(o, l)| (o.view(), l.view())).collect();
    let (o, l) = merge_partials(&views).expect("merge");
    assert!(wgpu_attention::compare(&o.view(), &all.out.view(), Tolerance::F32).passed());
    assert!(
        wgpu_attention::compare(&l.view(), &all.lse.expect("lse").view(), Tolerance::F32).passed()
    );
    // Errors: mismatched shapes, no parts, and a NaN in a part's output or LSE (a -inf LSE,
    // a part with no visible key, is allowed).
    let bad = ArrayD::<f32>::zeros(ndarray::IxDyn(&[1, 2, 5, 7]));
    assert!(merge_partials(&[
        (views[0].0.clone(), views[0].1.clone()),
        (bad.view(), views[0].1.clone())
    ])
    .is_err());
    assert!(merge_partials(&[]).is_err());
    let (mut nan_o, mut nan_l) = (parts[0].0.clone(), parts[0].1.clone());
    nan_o.as_slice_mut().expect("contiguous")[3] = f32::NAN;
    nan_l.as_slice_mut().expect("contiguous")[1] = f32::NAN;
    for (o, l) in [(&nan_o, &parts[0].1), (&parts[0].0, &nan_l)] {
        let e = merge_partials(&[(o.view(), l.view()), views[1].clone()]).expect_err("NaN");
        assert!(matches!(e, wgpu_attention::Error::NonFinite { .. }), "{e}");
    }
}
