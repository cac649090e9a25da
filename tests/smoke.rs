mod common;
use wgpu_attention::{AttentionOptions, Causal, Tolerance};

#[test]
fn smoke() {
    let Some(ctx) = common::ctx() else { return };
    eprintln!("{}", ctx.adapter_name());
    let mut rng = common::Rng::new(1);
    let q = rng.array(&[2, 3, 65, 5], 1.0);
    let k = rng.array(&[2, 1, 70, 5], 1.0);
    let v = rng.array(&[2, 1, 70, 7], 1.0);
    for causal in [Causal::None, Causal::TopLeft, Causal::BottomRight] {
        let opts = AttentionOptions::default()
            .causal(causal)
            .with_lse()
            .with_weights();
        common::assert_parity(&ctx, "smoke", &q, &k, &v, &opts, Tolerance::F32);
    }
}
