//! Criterion benchmarks: every path over a small shape grid, plus two CPU baselines (the f64
//! reference and per-head ndarray matmul attention), and a decode step from host arrays
//! against the same step from a `KvCache`. Each GPU result is checked against the
//! reference before it is timed. Run: `cargo bench --features bench` (needs a GPU adapter;
//! lavapipe works; criterion is an optional dependency so that `cargo test` does not build it).
//! The grid mixes prefill and decode shapes, so it runs at the vector width lavapipe is
//! given (`LP_NATIVE_VECTOR_WIDTH`, default 256 bits), unlike `wgpu-attention bench`, which
//! picks it per shape (wgpu_attention::cpu_vectors).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use wgpu_attention::perf::{cpu_matmul_attention, forward_flops};
use wgpu_attention::rng::Rng;
use wgpu_attention::{
    attention, attention_gpu, reference, AttentionOptions, Causal, Context, GpuTensor, KvCache,
    PathChoice, Tolerance,
};

/// Every forceable kernel path. Each is labelled with the path that ran (forced decode runs
/// the adapter's form, so on GPUs `Decode` and `DecodeWorkgroup` are one kernel, run once).
/// The tensor-core tier (where the adapter has cooperative matrices, or the context
/// emulates them: `WGPU_ATTENTION_COOP=emulate`) computes in f16 when forced on these f32
/// inputs, so it is held to FlashAttention's rule ([`reference::check_f16`]) rather than
/// the f32 tolerance.
const PATHS: [PathChoice; 7] = [
    PathChoice::Unfused,
    PathChoice::FusedSubgroup,
    PathChoice::FusedPortable,
    PathChoice::FusedTiled,
    PathChoice::FusedCoop,
    PathChoice::Decode,
    PathChoice::DecodeWorkgroup,
];

/// (B, Hq, Hkv, Lq, Lk, D): prefill shapes, a GQA decode shape, and an MLA-like decode of
/// width 512 (16 query heads over one kv head), which the unfused path, decode's workgroup
/// form, and the subgroup (widths up to 640) and tiled (Dv up to 512) tiers take.
const SHAPES: [(usize, usize, usize, usize, usize, usize); 4] = [
    (1, 8, 8, 256, 256, 64),
    (1, 8, 8, 512, 512, 64),
    (1, 32, 8, 1, 2048, 128),
    (1, 16, 1, 1, 1024, 512),
];

fn bench(c: &mut Criterion) {
    let ctx = match Context::new() {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("no GPU adapter, skipping GPU benchmarks: {e}");
            return;
        }
    };
    let mut group = c.benchmark_group("attention");
    group.sample_size(10);
    for (b, hq, hkv, lq, lk, d) in SHAPES {
        let id = format!("B{b} Hq{hq} Hkv{hkv} Lq{lq} Lk{lk} D{d}");
        let mut rng = Rng::new(3);
        let q = rng.array(&[b, hq, lq, d], 1.0);
        let k = rng.array(&[b, hkv, lk, d], 1.0);
        let v = rng.array(&[b, hkv, lk, d], 1.0);
        let expected =
            reference::attention(&q, &k, &v, &AttentionOptions::default()).expect("reference");
        group.throughput(Throughput::Elements(
            forward_flops(b, hq, lq, lk, d, d, Causal::None) as u64,
        ));
        let (qt, kt, vt) = (
            GpuTensor::from_array(&ctx, "q", &q).expect("upload"),
            GpuTensor::from_array(&ctx, "k", &k).expect("upload"),
            GpuTensor::from_array(&ctx, "v", &v).expect("upload"),
        );
        let mut ran = Vec::new();
        for path in PATHS {
            let opts = AttentionOptions::default().path(path);
            let Ok(r) = attention_gpu(&ctx, &qt, &kt, &vt, &opts) else {
                continue;
            };
            let name = r.plan.path;
            if ran.contains(&name) {
                continue;
            }
            ran.push(name);
            let out = r.out.to_array(&ctx).expect("download");
            if path == PathChoice::FusedCoop {
                let no_mask = AttentionOptions::default();
                let c = reference::check_f16(&q, &k, &v, &no_mask, &out).expect("reference");
                assert!(
                    c.passed(),
                    "{name} {id}: error {:e}, f16 attention on the CPU {:e}",
                    c.error,
                    c.cpu_f16_error
                );
            } else {
                let cmp =
                    wgpu_attention::compare(&out.view(), &expected.out.view(), Tolerance::F32);
                assert!(cmp.passed(), "{name} {id}: {cmp}");
            }
            group.bench_with_input(BenchmarkId::new(name, &id), &opts, |bench, opts| {
                bench.iter(|| {
                    attention_gpu(&ctx, &qt, &kt, &vt, opts).expect("attention");
                    ctx.wait().expect("wait");
                })
            });
        }
        group.bench_with_input(BenchmarkId::new("cpu-ndarray", &id), &(), |bench, _| {
            bench.iter(|| cpu_matmul_attention(&q, &k, &v, Causal::None).expect("cpu"))
        });
        if lq * lk <= 256 * 256 {
            group.bench_with_input(
                BenchmarkId::new("cpu-reference-f64", &id),
                &(),
                |bench, _| {
                    bench.iter(|| {
                        reference::attention(&q, &k, &v, &AttentionOptions::default())
                            .expect("reference")
                    })
                },
            );
        }
    }
    group.finish();
    decode_step(c, &ctx);
}

/// One decode step over a 2 048-position cache (B1 Hq32 Hkv8 D128, bottom-right causal),
/// from host arrays (`attention`: K and V uploaded with every call), from a `KvCache`
/// (only q uploaded) and from an f16 `KvCache` (decode reads half the bytes), all with the
/// readback, each checked against the reference first (the f16 cache against the reference
/// on its rounded keys and values).
fn decode_step(c: &mut Criterion, ctx: &Context) {
    let (hq, hkv, lk, d) = (32, 8, 2048, 128);
    let mut rng = Rng::new(4);
    let q = rng.array(&[1, hq, 1, d], 1.0);
    let k = rng.array(&[1, hkv, lk, d], 1.0);
    let v = rng.array(&[1, hkv, lk, d], 1.0);
    let opts = AttentionOptions::default().causal(Causal::BottomRight);
    let expected = reference::attention(&q, &k, &v, &opts).expect("reference");
    let mut cache = KvCache::new(ctx, 1, hkv, lk + 64, d, d).expect("cache");
    cache.append(ctx, &k, &v).expect("append");
    let check = |out: &ndarray::ArrayD<f32>, name: &str| {
        let cmp = wgpu_attention::compare(&out.view(), &expected.out.view(), Tolerance::F32);
        assert!(cmp.passed(), "{name}: {cmp}");
    };
    check(
        &attention(ctx, &q, &k, &v, &opts).expect("arrays").out,
        "host arrays",
    );
    check(
        &cache.attention(ctx, &q, &opts).expect("cache").out,
        "cache",
    );
    let mut cache_f16 = KvCache::new_f16(ctx, 1, hkv, lk + 64, d, d).expect("f16 cache");
    cache_f16.append(ctx, &k, &v).expect("append");
    let round = |a: &ndarray::ArrayD<f32>| a.mapv(|x| half::f16::from_f32(x).to_f32());
    let expected_f16 =
        reference::attention(&q, &round(&k), &round(&v), &opts).expect("reference on f16");
    let got = cache_f16.attention(ctx, &q, &opts).expect("f16 cache").out;
    let cmp = wgpu_attention::compare(&got.view(), &expected_f16.out.view(), Tolerance::F32);
    assert!(cmp.passed(), "f16 cache: {cmp}");
    let mut group = c.benchmark_group("decode step B1 Hq32 Hkv8 Lk2048 D128");
    group.sample_size(10);
    group.bench_function("host arrays", |bench| {
        bench.iter(|| attention(ctx, &q, &k, &v, &opts).expect("arrays"))
    });
    group.bench_function("kv cache", |bench| {
        bench.iter(|| cache.attention(ctx, &q, &opts).expect("cache"))
    });
    group.bench_function("kv cache f16", |bench| {
        bench.iter(|| cache_f16.attention(ctx, &q, &opts).expect("f16 cache"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
