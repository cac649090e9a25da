//! Work is split to fit device limits: contexts that request deliberately small limits still
//! match the reference, and the plan shows the split happened. These cases force the unfused
//! path (its score matrix is what limits bite first); `tests/fused.rs` covers the fused path.

mod common;

use common::{assert_parity, Rng};
use wgpu_attention::{
    AttentionOptions, Causal, Context, ContextOptions, Error, Mask, PathChoice, Tolerance,
};

fn small_context(binding: u64, groups_per_dim: u32) -> Option<Context> {
    let base = common::ctx()?;
    let mut limits = base.limits();
    limits.max_storage_buffer_binding_size = binding;
    limits.max_buffer_size = limits.max_buffer_size.max(binding);
    limits.max_compute_workgroups_per_dimension = groups_per_dim;
    // A coarse offset alignment exercises the window arithmetic.
    limits.min_storage_buffer_offset_alignment = 256;
    let opts = ContextOptions {
        limits: Some(limits),
        ..Default::default()
    };
    Some(Context::with_options(&opts).expect("a context with smaller limits than the adapter's"))
}

#[test]
fn small_storage_bindings_split_by_heads_and_rows() {
    let Some(ctx) = small_context(4096, 65535) else {
        return;
    };
    let mut rng = Rng::new(21);
    // Per head: q 2880 B, S 9000 B > 4096, so rows are split; k/v windows need alignment slack.
    let q = rng.array(&[2, 4, 45, 16], 1.0);
    let k = rng.array(&[2, 2, 50, 16], 1.0);
    let v = rng.array(&[2, 2, 50, 12], 1.0);
    let mask = rng.bool_array(&[2, 4, 45, 50], 0.8);
    for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
        let opts = AttentionOptions::default()
            .path(PathChoice::Unfused)
            .causal(causal)
            .mask(Mask::Bool(mask.view()))
            .with_lse()
            .with_weights();
        let r = assert_parity(
            &ctx,
            &format!("4 KiB bindings {causal:?}"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
        assert!(
            r.plan.chunks >= 8 * 3,
            "expected row splitting, got {} chunks",
            r.plan.chunks
        );
    }
    // Small heads (S 1920 B each, all 12 together 23 KiB): several whole heads per chunk.
    let q = rng.array(&[3, 4, 20, 8], 1.0);
    let k = rng.array(&[3, 4, 24, 8], 1.0);
    let v = rng.array(&[3, 4, 24, 8], 1.0);
    let r = assert_parity(
        &ctx,
        "many small heads",
        &q,
        &k,
        &v,
        &AttentionOptions::default()
            .path(PathChoice::Unfused)
            .with_lse(),
        Tolerance::F32,
    );
    assert!(
        r.plan.chunks > 1 && r.plan.chunks < 12,
        "expected head grouping, got {} chunks",
        r.plan.chunks
    );
}

#[test]
fn few_workgroups_per_dimension() {
    let Some(ctx) = small_context(1 << 20, 2) else {
        return;
    };
    let mut rng = Rng::new(22);
    let q = rng.array(&[1, 3, 37, 8], 1.0);
    let k = rng.array(&[1, 3, 100, 8], 1.0);
    let v = rng.array(&[1, 3, 100, 40], 1.0);
    for causal in [Causal::None, Causal::BottomRight] {
        let opts = AttentionOptions::default()
            .path(PathChoice::Unfused)
            .causal(causal)
            .with_lse();
        let r = assert_parity(
            &ctx,
            &format!("2 workgroups per dim {causal:?}"),
            &q,
            &k,
            &v,
            &opts,
            Tolerance::F32,
        );
        // At most 4 workgroups per dispatch: softmax takes 4 rows per chunk.
        assert!(r.plan.chunks >= 3 * 37 / 4, "got {} chunks", r.plan.chunks);
    }
}

#[test]
fn unsplittable_rows_are_an_error_not_a_crash() {
    let Some(ctx) = small_context(4096, 65535) else {
        return;
    };
    let mut rng = Rng::new(23);
    // One row of scores alone is 8000 bytes.
    let q = rng.array(&[1, 4], 1.0);
    let k = rng.array(&[2000, 4], 1.0);
    let v = rng.array(&[2000, 4], 1.0);
    let err = wgpu_attention::attention(
        &ctx,
        &q,
        &k,
        &v,
        &AttentionOptions::default().path(PathChoice::Unfused),
    )
    .expect_err("too large");
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("max binding"), "{err}");
}
