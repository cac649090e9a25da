//! A bounded mutation fuzzer for input parsing and option handling: `.npy` bytes (from valid
//! seeds, mutated), then shapes, masks and options through validation. It never touches the
//! GPU, so it runs anywhere. Any panic is a finding. Run by `scripts/fuzz.sh`, or:
//! `cargo run --release --example fuzz_inputs -- SECONDS [SEED]`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use ndarray::{ArrayD, IxDyn};
use wgpu_attention::npy::{self, NpyArray};
use wgpu_attention::rng::Rng;
use wgpu_attention::{reference, AttentionOptions, Causal, Mask};

fn seeds() -> Vec<Vec<u8>> {
    let a = ArrayD::from_shape_fn(IxDyn(&[2, 3, 4]), |i| i[2] as f32 - 1.5);
    let b = ArrayD::from_shape_fn(IxDyn(&[3, 5]), |i| (i[0] + i[1]) % 2 == 0);
    vec![
        npy::to_bytes(&a.view()),
        npy::bool_to_bytes(&b.view()),
        npy::to_bytes(&ArrayD::zeros(IxDyn(&[7])).view()),
    ]
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = rng.next_u64() as u8;
            }
            2 => out.truncate(rng.below(out.len() + 1)),
            3 => {
                let at = rng.below(out.len() + 1);
                let bytes: Vec<u8> = (0..1 + rng.below(8))
                    .map(|_| b"0123456789(),' :{}TrueFalse<>|f4b1i8"[rng.below(36)])
                    .collect();
                out.splice(at..at, bytes);
            }
            4 if out.len() > 12 => {
                // Rewrite a digit of the header (shapes, lengths).
                let i = 10 + rng.below(out.len().min(80) - 10);
                if out[i].is_ascii_digit() {
                    out[i] = b'0' + rng.below(10) as u8;
                }
            }
            _ => out.extend((0..rng.below(16)).map(|_| rng.next_u64() as u8)),
        }
    }
    out
}

/// One execution: parse, and when that yields f32 data use it as q/k/v with random options.
/// Returns how far it got: 0 rejected by the parser, 1 parsed, 2 validated, 3 computed.
fn run_one(rng: &mut Rng, bytes: &[u8]) -> usize {
    let Ok(arr) = npy::parse("fuzz.npy", bytes) else {
        return 0;
    };
    let NpyArray::F32(a) = arr else { return 1 };
    let causal = [Causal::None, Causal::TopLeft, Causal::BottomRight][rng.below(3)];
    let mut opts = AttentionOptions::default().causal(causal);
    if rng.below(3) == 0 {
        opts.scale = Some([0.0f32, -1.0, f32::NAN, 1e30, 0.5][rng.below(5)]);
    }
    let mask_shape: Vec<usize> = (0..rng.below(5)).map(|_| rng.below(4)).collect();
    let mask = ArrayD::from_elem(IxDyn(&mask_shape), rng.below(2) == 0);
    if rng.below(2) == 0 {
        opts.mask = Some(Mask::Bool(mask.view()));
    }
    if reference::validate(&a, &a, &a, &opts).is_err() {
        return 1;
    }
    if a.len() <= 4096 && reference::attention(&a, &a, &a, &opts).is_ok() {
        return 3;
    }
    2
}

pub fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    std::panic::set_hook(Box::new(|_| {}));
    let mut rng = Rng::new(seed);
    let corpus = seeds();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut execs, mut findings) = (0u64, 0u64);
    let mut depth = [0u64; 4];
    while Instant::now() < deadline {
        let pick = rng.below(corpus.len());
        let input = mutate(&mut rng, &corpus[pick]);
        let mut inner = Rng::new(rng.next_u64());
        let outcome = catch_unwind(AssertUnwindSafe(|| run_one(&mut inner, &input)));
        if let Ok(d) = outcome {
            depth[d.min(3)] += 1;
        }
        if outcome.is_err() {
            findings += 1;
            let path = format!("fuzz-finding-{findings}.npy");
            let _ = std::fs::write(&path, &input);
            eprintln!("finding {findings}: panic on input saved to {path}");
        }
        execs += 1;
    }
    println!("fuzz_inputs: {execs} executions in {seconds} s (seed {seed}), {findings} findings");
    println!(
        "  rejected by the parser {}; parsed but refused by validation {}; validated, too large to compute {}; validated and computed {}",
        depth[0], depth[1], depth[2], depth[3]
    );
    if findings > 0 {
        std::process::exit(1);
    }
}
