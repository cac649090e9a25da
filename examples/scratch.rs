use std::time::Instant;
use wgpu_attention::{perf, rng::Rng, AttentionOptions, Causal, Context, GpuTensor, PathChoice};
fn main() {
    let ctx = Context::new().unwrap();
    let mut rng = Rng::new(1);
    let (b, h, l, d) = (1, 8, 1024, 64);
    let q = GpuTensor::from_array(&ctx, "q", &rng.array(&[b, h, l, d], 1.0)).unwrap();
    let k = GpuTensor::from_array(&ctx, "k", &rng.array(&[b, h, l, d], 1.0)).unwrap();
    let v = GpuTensor::from_array(&ctx, "v", &rng.array(&[b, h, l, d], 1.0)).unwrap();
    for path in [PathChoice::FusedSubgroup, PathChoice::FusedPortable] {
        for causal in [Causal::None, Causal::TopLeft] {
            let opts = AttentionOptions::default().causal(causal).path(path);
            let t0 = Instant::now();
            wgpu_attention::attention_gpu(&ctx, &q, &k, &v, &opts).unwrap();
            ctx.wait().unwrap();
            let first = t0.elapsed().as_secs_f64();
            let t = perf::time_gpu(&ctx, &q, &k, &v, &opts, 1, 5).unwrap();
            let fl = perf::forward_flops(b, h, l, l, d, d, causal);
            println!(
                "{path:?} {causal:?}: first call {first:.2}s, median {:.2} ms, {:.1} GFLOP/s",
                t.median_ms(),
                fl / t.median_ms() / 1e6
            );
        }
    }
}
