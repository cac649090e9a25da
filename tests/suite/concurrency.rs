//! One `Context` shared by 8 threads running mixed shapes and paths, every result checked
//! against the reference; and determinism: the same inputs give bitwise identical outputs
//! across calls and threads, per path.

use crate::common;

use std::sync::Arc;

use common::Rng;
use ndarray::ArrayD;
use wgpu_attention::{reference, AttentionOptions, Causal, PathChoice, Tolerance};

type Case = (ArrayD<f32>, ArrayD<f32>, ArrayD<f32>, Causal, PathChoice);

fn cases() -> Vec<Case> {
    let mut rng = Rng::new(61);
    let mut out = Vec::new();
    let shapes = [
        [1, 4, 4, 33, 47, 16],
        [2, 2, 1, 9, 300, 16],
        [1, 2, 2, 70, 70, 8],
        [1, 8, 2, 1, 500, 16],
    ];
    let paths = [
        PathChoice::Auto,
        PathChoice::Unfused,
        PathChoice::FusedPortable,
        PathChoice::FusedTiled,
        PathChoice::Decode,
    ];
    for (i, [b, hq, hkv, lq, lk, d]) in shapes.into_iter().enumerate() {
        for (j, path) in paths.into_iter().enumerate() {
            let causal = [Causal::None, Causal::TopLeft, Causal::BottomRight][(i + j) % 3];
            out.push((
                rng.array(&[b, hq, lq, d], 1.0),
                rng.array(&[b, hkv, lk, d], 1.0),
                rng.array(&[b, hkv, lk, d], 1.0),
                causal,
                path,
            ));
        }
    }
    out
}

#[test]
fn eight_threads_share_one_context() {
    let Some(ctx) = common::ctx() else { return };
    let cases = Arc::new(cases());
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let (ctx, cases) = (ctx.clone(), Arc::clone(&cases));
            std::thread::spawn(move || {
                for round in 0..3 {
                    for (i, (q, k, v, causal, path)) in cases.iter().enumerate() {
                        if (i + t + round) % 2 == 1 {
                            continue;
                        }
                        let opts = AttentionOptions::default()
                            .causal(*causal)
                            .path(*path)
                            .with_lse();
                        let got = wgpu_attention::attention(&ctx, q, k, v, &opts)
                            .unwrap_or_else(|e| panic!("thread {t} case {i}: {e}"));
                        let want = reference::attention(q, k, v, &opts).expect("reference");
                        let c = wgpu_attention::compare(
                            &got.out.view(),
                            &want.out.view(),
                            Tolerance::F32,
                        );
                        assert!(c.passed(), "thread {t} case {i} ({path:?}): {c}");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a worker thread failed");
    }
}

#[test]
fn outputs_are_bitwise_deterministic() {
    let Some(ctx) = common::ctx() else { return };
    for (i, (q, k, v, causal, path)) in cases().iter().enumerate() {
        let opts = AttentionOptions::default()
            .causal(*causal)
            .path(*path)
            .with_lse();
        let first = wgpu_attention::attention(&ctx, q, k, v, &opts).expect("first");
        let bits = |a: &ArrayD<f32>| a.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        // Again on this thread, and on another thread at the same time as this one.
        let (c2, q2, k2, v2) = (ctx.clone(), q.clone(), k.clone(), v.clone());
        let (causal2, path2) = (*causal, *path);
        let other = std::thread::spawn(move || {
            let opts = AttentionOptions::default()
                .causal(causal2)
                .path(path2)
                .with_lse();
            wgpu_attention::attention(&c2, &q2, &k2, &v2, &opts)
                .expect("other thread")
                .out
        });
        let again = wgpu_attention::attention(&ctx, q, k, v, &opts).expect("again");
        let from_thread = other.join().expect("thread");
        assert_eq!(
            bits(&first.out),
            bits(&again.out),
            "case {i} {path:?}: output differs between calls"
        );
        assert_eq!(
            bits(&first.out),
            bits(&from_thread),
            "case {i} {path:?}: output differs across threads"
        );
        let (l1, l2) = (first.lse.expect("lse"), again.lse.expect("lse"));
        assert_eq!(bits(&l1), bits(&l2), "case {i} {path:?}: lse differs");
    }
}
