//! Developer probe: this CPU's ceilings, to put the lavapipe figures beside what the machine
//! can do at all. No GPU is involved. It measures, with 1 thread and with every core:
//! - f32 multiply-adds as fused FMA instructions (what PyTorch's CPU kernels run),
//! - the same work as a multiply and a separate add (what llvmpipe runs: Mesa 22.3 lowers
//!   every `fma` to the two, `lower_ffma32`), each counted as 2 FLOPs per lane,
//! - a streaming read of 1 GiB (a sum over it), and of 32 MiB read again and again (as a
//!   benchmark of decode reads the same K and V, 33.5 MB at the decode goal's shape, at
//!   every repetition, whatever of it the caches hold): the ceilings for decode, which
//!   reads K and V once.
//!
//! The arithmetic runs 16 independent accumulators (14 with AVX2; more than an FMA's latency
//! times the number of ports), so it times throughput, not latency. AVX-512 where the CPU
//! has it (16 lanes), else AVX2 with FMA (8 lanes); other CPUs get a message and no figures.
//!
//! Run: `cargo run --release --example cpu_ceiling` (best of 5 runs per figure). Pause
//! anything else that runs on the machine first: it shares the cores.

use std::time::Instant;

/// Multiply-adds per lane and accumulator in one arithmetic run.
const ITERATIONS: usize = 20_000_000;
/// Bytes summed by the streaming read, split across the threads.
const READ_BYTES: usize = 1 << 30;
/// Bytes summed by the repeated read (the first of its runs warms the caches).
const REREAD_BYTES: usize = 32 << 20;
const RUNS: usize = 5;

fn main() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Some(kernels) = arch::kernels() else {
        println!("cpu_ceiling: this probe needs an x86-64 CPU with AVX-512F or AVX2 and FMA");
        return;
    };
    println!(
        "{} lanes of f32 ({}), {threads} threads available; best of {RUNS} runs",
        kernels.lanes, kernels.name
    );
    let data = vec![1.0f32; READ_BYTES / 4];
    let reread = vec![1.0f32; REREAD_BYTES / 4];
    let mut counts = vec![1];
    if threads > 1 {
        counts.push(threads);
    }
    for &n in &counts {
        let per_round = kernels.lanes * kernels.accumulators;
        let fma = best(|| flops(n, kernels.fma, per_round));
        let mul_add = best(|| flops(n, kernels.mul_add, per_round));
        let read = best(|| read_gbs(n, &data));
        let again = best(|| read_gbs(n, &reread));
        println!(
            "{n} thread(s): FMA {fma:.1} GFLOP/s, multiply + add {mul_add:.1} GFLOP/s, \
             read of 1 GiB {read:.1} GB/s, of 32 MiB again {again:.1} GB/s"
        );
    }
}

fn best(mut f: impl FnMut() -> f64) -> f64 {
    (0..RUNS).map(|_| f()).fold(0.0, f64::max)
}

/// GFLOP/s of `n` threads each running `kernel`: ITERATIONS rounds of `per_round`
/// multiply-adds (lanes × accumulators), 2 FLOPs each.
fn flops(n: usize, kernel: fn(usize) -> f32, per_round: usize) -> f64 {
    let start = Instant::now();
    let sink: f32 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|_| s.spawn(move || kernel(ITERATIONS)))
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).sum()
    });
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(sink);
    (n * per_round * ITERATIONS * 2) as f64 / secs / 1e9
}

/// GB/s of `n` threads summing their share of `data`.
fn read_gbs(n: usize, data: &[f32]) -> f64 {
    let chunk = data.len().div_ceil(n);
    let start = Instant::now();
    let total: f32 = std::thread::scope(|s| {
        let handles: Vec<_> = data
            .chunks(chunk)
            .map(|part| s.spawn(move || sum(part)))
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).sum()
    });
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(total);
    std::mem::size_of_val(data) as f64 / secs / 1e9
}

/// The sum of `part` over 16 running sums, which the compiler turns into vector adds of
/// whatever width the build allows (SSE2 by default): memory, not arithmetic, bounds it.
fn sum(part: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let mut blocks = part.chunks_exact(16);
    for block in &mut blocks {
        for (a, x) in acc.iter_mut().zip(block) {
            *a += x;
        }
    }
    acc.iter().sum::<f32>() + blocks.remainder().iter().sum::<f32>()
}

/// The arithmetic loops this CPU can run, and their shape.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Kernels {
    name: &'static str,
    /// f32 lanes of a vector register.
    lanes: usize,
    /// Independent accumulators (vector registers) each loop round updates.
    accumulators: usize,
    /// `n` rounds of FMA instructions; returns a value so that nothing is optimised away.
    fma: fn(usize) -> f32,
    /// `n` rounds of a multiply and a separate add.
    mul_add: fn(usize) -> f32,
}

#[cfg(target_arch = "x86_64")]
mod arch {
    //! The arithmetic in inline assembly: the crate's minimum Rust (1.87, wgpu's) has no
    //! AVX-512 intrinsics, and assembly also pins the instructions (nothing fused, nothing
    //! split). Each loop keeps 16 accumulators (14 with 8 lanes) in vector registers 0-15
    //! (0-13), starting at 1, the multiplier (just below 1) in register 16 (14) and the
    //! addend (tiny) in 17 (15), so the values stay finite; it ends with `vzeroupper` so that
    //! the SSE code around it pays no transition.

    use super::Kernels;
    use std::arch::asm;

    pub fn kernels() -> Option<Kernels> {
        if is_x86_feature_detected!("avx512f") {
            Some(Kernels {
                name: "AVX-512",
                lanes: 16,
                accumulators: 16,
                fma: fma512,
                mul_add: mul_add512,
            })
        } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            Some(Kernels {
                name: "AVX2 + FMA",
                lanes: 8,
                accumulators: 14,
                fma: fma256,
                mul_add: mul_add256,
            })
        } else {
            None
        }
    }

    const CONSTANTS: [f32; 3] = [1.0, 0.999_999, 1e-7];

    /// A function running `n` rounds of `$body` for every accumulator (register `\r` of
    /// `$registers`, through `.irp`), on vector registers named `$vec` (zmm or ymm), the
    /// multiplier in register `$mul` and the addend in `$add`; returns lane 0 of
    /// accumulator 0.
    macro_rules! accumulate {
        ($name:ident, $vec:literal, $registers:literal, $mul:literal, $add:literal,
         $body:literal) => {
            fn $name(n: usize) -> f32 {
                let mut out = 0.0f32;
                if n == 0 {
                    return out;
                }
                // SAFETY: kernels() hands out these functions only where the CPU has the
                // instructions. The assembly reads CONSTANTS and writes `out` through valid
                // pointers, touches no other memory, and declares the registers it changes:
                // the counter, and vector registers 0-15 as xmm clobbers (this crate's code
                // uses no vector register above 15 and no upper half, as it is built
                // without AVX; vzeroupper clears the upper halves).
                unsafe {
                    asm!(
                        // Every accumulator 1, then the multiplier and the addend.
                        concat!(".irp r,", $registers),
                        concat!("vbroadcastss ", $vec, "\\r, dword ptr [{constants}]"),
                        ".endr",
                        concat!("vbroadcastss ", $vec, $mul, ", dword ptr [{constants} + 4]"),
                        concat!("vbroadcastss ", $vec, $add, ", dword ptr [{constants} + 8]"),
                        "2:",
                        concat!(".irp r,", $registers),
                        $body,
                        ".endr",
                        "dec {n}",
                        "jnz 2b",
                        "vmovss dword ptr [{out}], xmm0",
                        "vzeroupper",
                        constants = in(reg) CONSTANTS.as_ptr(),
                        out = in(reg) &mut out,
                        n = inout(reg) n => _,
                        out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                        out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                        out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                        out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
                        options(nostack),
                    );
                }
                out
            }
        };
    }

    accumulate!(
        fma512,
        "zmm",
        "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15",
        "16",
        "17",
        "vfmadd132ps zmm\\r, zmm17, zmm16"
    );
    accumulate!(
        mul_add512,
        "zmm",
        "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15",
        "16",
        "17",
        "vmulps zmm\\r, zmm\\r, zmm16\nvaddps zmm\\r, zmm\\r, zmm17"
    );
    // Without AVX-512 there are 16 vector registers: 14 accumulators, the constants in 14
    // and 15.
    accumulate!(
        fma256,
        "ymm",
        "0,1,2,3,4,5,6,7,8,9,10,11,12,13",
        "14",
        "15",
        "vfmadd132ps ymm\\r, ymm15, ymm14"
    );
    accumulate!(
        mul_add256,
        "ymm",
        "0,1,2,3,4,5,6,7,8,9,10,11,12,13",
        "14",
        "15",
        "vmulps ymm\\r, ymm\\r, ymm14\nvaddps ymm\\r, ymm\\r, ymm15"
    );
}

#[cfg(not(target_arch = "x86_64"))]
mod arch {
    pub fn kernels() -> Option<super::Kernels> {
        None
    }
}
