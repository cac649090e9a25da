//! The probe of the tier's cooperative operations (src/fused/coop/coop_ops_probe.wgsl):
//! each operation the kernels use (load_a, load_kt, mul_add, store_scores, load_vt, acc_store,
//! acc_load, load_low) run on blocks of known values, multiples of 1/4 and 1/64 whose
//! products and sums f32 holds exactly, so that every result must equal its
//! definition exactly, whatever the order of the additions. On a device with matrix units
//! the tier's check runs it once a context, before the first pipeline's (crate::attention's
//! coop_check; or when the caller asks, `Context::check_coop`), so that
//! where the hardware's operations differ from what the kernels assume (a layout, a stride,
//! the numbering of the subgroups) the plan's reason says which, not only that an output
//! was off; CI runs it on the emulated operations (tests/suite/coop.rs).

use super::kernels::{COOP_OPS_PROBE, COOP_OPS_PROBE_EMULATED};
use crate::context::Context;
use crate::error::Result;
use crate::kernel::PipelineKey;
use crate::params::CopyParams;
use crate::plan::{whole, DeviceBudget};
use crate::profile::CoopSupport;

/// Values each subgroup writes: four 16 x 16 blocks.
const PER_SUBGROUP: usize = 1024;

/// The subgroups of the probe's 128 invocations at `lanes` a subgroup (16 to 128, as the
/// tier takes them).
fn subgroups(lanes: u32) -> u32 {
    128 / lanes.clamp(16, 128)
}

/// The probe's inputs, row-major: K (32 x 32), A (16 x 32) and L (16 x 32), as the kernel
/// reads them (`src`). K and A in -1..=1 in steps of 1/4, L in -1/32..=1/32 in steps of
/// 1/64: every product and every sum of the probe is exact in f32.
fn inputs() -> [Vec<f32>; 3] {
    let mut state = 0x2545_f491_u32;
    let mut steps = |n: usize, levels: u32, step: f32| -> Vec<f32> {
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let level = (state >> 16) % levels;
                (level as f32 - (levels / 2) as f32) * step
            })
            .collect()
    };
    let k = steps(32 * 32, 9, 0.25);
    let a = steps(16 * 32, 9, 0.25);
    let l = steps(16 * 32, 5, 1.0 / 64.0);
    [k, a, l]
}

/// What a 16 x 16 B operand holds at (row, column), as the kernel means it (`swapped`
/// false) or read the other way round (true), for the probe's diagnosis.
type Operand<'a> = &'a dyn Fn(usize, usize, bool) -> f32;

/// Σ_t left(i, t) · b(t, j) over one 16 x 16 block of each.
fn product(left: &dyn Fn(usize, usize) -> f32, b: Operand<'_>, swapped: bool) -> Vec<f32> {
    (0..256)
        .map(|e| {
            let (i, j) = (e / 16, e % 16);
            (0..16).map(|t| left(i, t) * b(t, j, swapped)).sum()
        })
        .collect()
}

/// The four blocks of coop_ops_probe.wgsl's steps, with the B operands as the kernel reads
/// them (`swapped` false) or transposed.
fn blocks([k, a, l]: &[Vec<f32>; 3], swapped: bool) -> [Vec<f32>; 4] {
    let at = |m: &[f32], r: usize, c: usize| m.get(r * 32 + c).copied().unwrap_or(f32::NAN);
    let k_at = |r: usize, c: usize| at(k, r, c);
    // A block of K as a B operand from row r0, column c0, as the kernel reads it: for
    // Q Kᵀ its (t, j) is K[r0 + j][c0 + t] (K's rows are keys), for P V it is
    // V[r0 + t][c0 + j].
    let kt = |r0: usize, c0: usize| {
        move |t: usize, j: usize, swap: bool| {
            let (t, j) = if swap { (j, t) } else { (t, j) };
            k_at(r0 + j, c0 + t)
        }
    };
    let v = |r0: usize, c0: usize| {
        move |t: usize, j: usize, swap: bool| {
            let (t, j) = if swap { (j, t) } else { (t, j) };
            k_at(r0 + t, c0 + j)
        }
    };
    let a_cols = |c0: usize| move |i: usize, t: usize| at(a, i, c0 + t);
    let sum = |x: Vec<f32>, y: Vec<f32>| -> Vec<f32> {
        x.iter().zip(&y).map(|(p, q)| p + q).collect()
    };
    let scores = sum(
        product(&a_cols(0), &kt(16, 0), swapped),
        product(&a_cols(16), &kt(16, 16), swapped),
    );
    let out = product(&a_cols(0), &v(16, 16), swapped);
    let again = sum(out.clone(), product(&a_cols(16), &v(0, 16), swapped));
    let low = |i: usize, t: usize| at(l, i, 16 + t);
    let split = sum(
        product(&a_cols(16), &v(0, 0), swapped),
        product(&low, &v(0, 0), swapped),
    );
    [scores, out, again, split]
}

/// What each step of the probe checks, for its diagnosis.
const STEPS: [&str; 4] = [
    "Q Kᵀ (load_a, load_kt, mul_add, store_scores)",
    "P V (load_vt, mul_add, acc_store)",
    "an accumulator stored, loaded and added to (acc_load, load_vt, mul_add, acc_store)",
    "P V with the weights' low parts (load_low, load_vt, mul_add twice)",
];

/// The probe's pipeline on `ctx` with subgroups of `lanes`: the hardware operations where
/// the context has them, else the emulated ones. The tier's check keeps it among the
/// pipelines that passed, so that a context runs the probe once.
pub(crate) fn key(ctx: &Context, lanes: u32) -> PipelineKey {
    let kernel = match ctx.coop() {
        CoopSupport::Emulated => COOP_OPS_PROBE_EMULATED,
        _ => COOP_OPS_PROBE,
    };
    let slots = subgroups(lanes);
    let lanes = 128 / slots;
    let lane_elems = super::emulated_lane_elems(ctx.coop(), lanes);
    PipelineKey {
        kernel,
        constants: vec![("SG", lanes)],
        sizes: vec![("SLOTS", slots), ("LANE_ELEMS", lane_elems)],
    }
}

/// Runs the probe on `ctx` with subgroups of `lanes` (the tier's SG) and `inputs`: the
/// hardware operations where the context has them, else the emulated ones. Returns what the
/// subgroups wrote, in order: every subgroup's four blocks, or as many values as one of
/// the device's bindings holds.
fn run(ctx: &Context, lanes: u32, inputs: &[Vec<f32>; 3]) -> Result<Vec<f32>> {
    let slots = subgroups(lanes);
    let pipe = ctx.pipeline(&key(ctx, lanes))?;
    let src = ctx.upload("coop probe inputs", &inputs.concat())?;
    let budget = DeviceBudget::from_limits(&ctx.limits());
    let n = (slots as usize * PER_SUBGROUP).min((budget.max_binding / 4) as usize);
    let dst = ctx.scratch_buffer("coop probe outputs", n as u64 * 4)?;
    let params = ctx.uniform(
        "coop probe params",
        &CopyParams {
            n4: n as u32,
            pad: [0; 3],
        },
    );
    let bg = pipe.bind_group(ctx.device(), &[whole(&params), whole(&src), whole(&dst)]);
    ctx.run_pass("coop ops probe", |pass| {
        budget.dispatch(pass, &pipe, &bg, 1)
    })?;
    ctx.download(&dst, n)
}

/// Runs the probe (with subgroups of `lanes`) and holds what the subgroups wrote to the
/// definitions, exactly (every subgroup's results where one binding holds them: 16 KiB at
/// 32 lanes; none where a binding holds less than its 8 KiB of inputs): `Err` names the
/// first step and subgroup that differ, where, and whether the result is the definition
/// with the B operand or the output transposed.
pub fn check(ctx: &Context, lanes: u32) -> std::result::Result<(), String> {
    let inputs = inputs();
    // Its inputs take 8 KiB: where a binding holds less (no real device; small test
    // contexts), the pipeline's own check is all there is.
    let input_bytes = 4 * inputs.iter().map(Vec::len).sum::<usize>() as u64;
    if DeviceBudget::from_limits(&ctx.limits()).max_binding < input_bytes {
        return Ok(());
    }
    let got = run(ctx, lanes, &inputs)
        .map_err(|e| format!("the cooperative operations' probe: {e}"))?;
    let want = blocks(&inputs, false);
    let swapped = blocks(&inputs, true);
    for (sg, written) in got.chunks(PER_SUBGROUP).enumerate() {
        for (step, (block, name)) in written.chunks(256).zip(STEPS).enumerate() {
            let (Some(want), Some(swapped)) = (want.get(step), swapped.get(step)) else {
                continue;
            };
            let Some(e) = (0..block.len()).find(|&e| block.get(e) != want.get(e)) else {
                continue;
            };
            let transposed = (0..256).all(|e| block.get(e) == want.get(e % 16 * 16 + e / 16));
            let hint = if block == swapped.as_slice() {
                "; it is the definition with the B operand transposed"
            } else if transposed {
                "; it is the definition transposed"
            } else {
                ""
            };
            return Err(format!(
                "the cooperative operations' probe: {name} in subgroup {sg} of {}: at ({}, {}) {} where {} is meant{hint}",
                subgroups(lanes),
                e / 16,
                e % 16,
                block.get(e).copied().unwrap_or(f32::NAN),
                want.get(e).copied().unwrap_or(f32::NAN),
            ));
        }
    }
    Ok(())
}
