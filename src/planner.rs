//! The planner: which path runs a problem, and why. Forced paths are checked and refused
//! with the reason; auto ranks the paths by what was measured on each kind of adapter
//! (README "Measured") and skips those the problem or the adapter rules out: widths, device
//! limits, requested weights, and on llvmpipe its loop limit (crate::loops).

use crate::decode;
use crate::error::{Error, Result};
use crate::family::{Family, InputFacts};
use crate::fused::{self, Tier};
use crate::half_format::HalfFormat;
use crate::options::{AttentionOptions, PathChoice, Precision};
use crate::problem::Problem;
use crate::profile::DeviceProfile;
use crate::unfused::Unfused;

/// A kernel path the planner can pick: a family, or one tier or form of one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    Unfused,
    Fused(Tier),
    Decode(decode::Form),
}

impl Path {
    /// Every path, each family's tiers and forms: the list a new family joins (beside its
    /// place in [`choose_path`]'s ranking and its `PathChoice`).
    #[cfg(any(test, feature = "internals"))]
    const ALL: [Path; 7] = [
        Path::Unfused,
        Path::Fused(Tier::Subgroup),
        Path::Fused(Tier::Portable),
        Path::Fused(Tier::Tiled),
        Path::Fused(Tier::Coop),
        Path::Decode(decode::Form::Invocation),
        Path::Decode(decode::Form::Workgroup),
    ];

    /// The family that runs this path: what the executor plans, estimates and dispatches
    /// through.
    pub(crate) fn family(&self) -> &dyn Family {
        match self {
            Path::Unfused => &Unfused,
            Path::Fused(tier) => tier,
            Path::Decode(form) => form,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        self.family().name()
    }
}

/// A path and why it was picked.
type Choice = Result<(Path, String)>;

fn unavailable(path: &'static str, reason: String) -> Error {
    Error::PathUnavailable { path, reason }
}

/// Whether lavapipe's 16-lane vectors (512 bits, crate::profile::cpu_vectors) suit a problem with `rows_per_kv_head` query rows per kv head
/// (Hq/Hkv x Lq) over `lk` keys, of widths `d` and `dv`: everything but the shapes the
/// planner sends to decode at 16 lanes (up to 4 query rows per kv head:
/// `crate::decode::auto_rows`), 5-8 rows from
/// `crate::decode::EIGHT_LANE_DECODE_MIN_KEYS` keys, which decode at 8 lanes runs 1.2-1.9
/// times as fast as the subgroup tier at 16 (below that many keys the subgroup tier at 16
/// lanes runs them), and 9-16 rows of widths up to 128 from
/// `crate::decode::EIGHT_LANE_GROUP_MIN_KEYS` keys (1.2-2.4 times;
/// `decode::suits_eight_lanes`); for widths
/// above 256, up to `crate::decode::CPU_WIDE_DECODE_ROWS`, decode's workgroup form, which
/// ran as fast or faster at 256 bits), and widths above
/// `fused::SUBGROUP_WIDE_MAX_WIDTH`, which auto gives only to decode's workgroup form and
/// the unfused path (not measured at 512 bits). Widths 129-256 kept 256 bits until
/// 2026-12-01, when the subgroup tier's wide variant took about 2 minutes to compile at 512
/// bits; with its loops over D unrolled it takes 28 s at D 256 and runs faster at 512:
/// `scripts/paired_rounds.py 3 1,8,1024,1024,256` (GFLOP/s, medians, non-causal/causal):
/// 79.1/69.6 at 512 bits against 54.9/51.2 at 256 (R = 4 both; docs/measurements.md).
/// Widths 257-640 (the subgroup tier's since 2026-12-02): `bench --shape 1,8,512,512,512
/// --path fused-subgroup --reps 5` ran 102.0 ms at 512 bits against 127.0 at 256 (Intel
/// Xeon, one run each).
pub fn suits_wide(rows_per_kv_head: usize, lk: usize, d: usize, dv: usize) -> bool {
    let width = d.max(dv);
    !decode::suits_eight_lanes(rows_per_kv_head, lk, width)
        && width <= fused::SUBGROUP_WIDE_MAX_WIDTH
}

/// Why `path` cannot run `p` here: requested weights where the path has none, then the
/// family's own obstacle.
fn obstacle(
    dev: &DeviceProfile,
    p: &Problem,
    path: Path,
    weights: Option<&String>,
    facts: InputFacts,
) -> Option<String> {
    let family = path.family();
    weights
        .filter(|_| !family.returns_weights())
        .cloned()
        .or_else(|| family.obstacle(dev, p, facts))
}

/// [`obstacle`] of `path` where no weights are asked for and nothing is known of the
/// inputs beyond their shapes.
fn path_obstacle(dev: &DeviceProfile, p: &Problem, path: Path) -> Option<String> {
    obstacle(dev, p, path, None, InputFacts::default())
}

/// Whether auto takes the cooperative-matrix tier for a call.
enum CoopAuto {
    /// Yes: the inputs are f16, or the caller asked for f16 compute, and the tier runs here.
    Take,
    /// Not asked for: f32 inputs stay in f32.
    NotAsked,
    /// Asked for but passed over, and why.
    PassedOver(String),
}

/// Whether auto takes the cooperative-matrix tier for `p`. bf16 K and V stay on the f32
/// paths unless f16 compute is asked for, as their values may not fit f16's range (the
/// attention layer asks for it where their magnitudes are known to fit).
fn coop_auto(
    dev: &DeviceProfile,
    p: &Problem,
    opts: &AttentionOptions<'_>,
    facts: InputFacts,
) -> CoopAuto {
    let asked = opts.precision == Precision::F16;
    match facts.kv_half {
        _ if asked => {}
        Some(HalfFormat::F16) => {}
        Some(HalfFormat::Bf16) => {
            return CoopAuto::PassedOver(
                "bf16 K and V may not fit f16's range, in which it multiplies (beyond 65504, or V wholly below its normal range, 2^-14; Precision::F16 asks for it)"
                    .into(),
            )
        }
        None => return CoopAuto::NotAsked,
    }
    match obstacle(dev, p, Path::Fused(Tier::Coop), None, facts) {
        None => CoopAuto::Take,
        Some(why) => CoopAuto::PassedOver(why),
    }
}

/// Every kernel of the crate: each family's table (once, where its tiers or forms share
/// one; the fused family's coop tier has a table of its own) and the kernels no family
/// owns. (For the tests that check every shader, through
/// the `internals` feature.)
#[cfg(feature = "internals")]
pub fn every_kernel() -> Vec<crate::kernel::Kernel> {
    let mut tables: Vec<&[crate::kernel::Kernel]> = Vec::new();
    for path in Path::ALL {
        let table = path.family().kernels();
        // The tiers (or forms) of one family answer through one function, so they return
        // the same table at the same address; were one ever repeated, the test that
        // kernel labels are unique would fail rather than pass.
        if !tables.iter().any(|t| std::ptr::eq(*t, table)) {
            tables.push(table);
        }
    }
    tables.push(crate::kernel::shared::ALL);
    tables.concat()
}

/// Picks a path from the shapes, the options, what is known of the inputs and the adapter,
/// and says why.
pub(crate) fn choose_path(
    dev: &DeviceProfile,
    p: &Problem,
    opts: &AttentionOptions<'_>,
    facts: InputFacts,
) -> Choice {
    let weights = fused::weights_obstacle(opts.return_weights);
    let forced = |path: Path| match obstacle(dev, p, path, weights.as_ref(), facts) {
        Some(why) => Err(unavailable(path.name(), why)),
        None => Ok((path, forced_reason(path, opts, facts))),
    };
    let coop = coop_auto(dev, p, opts, facts);
    match opts.path {
        PathChoice::Unfused => forced(Path::Unfused),
        PathChoice::FusedSubgroup => forced(Path::Fused(Tier::Subgroup)),
        PathChoice::FusedPortable => forced(Path::Fused(Tier::Portable)),
        PathChoice::FusedTiled => forced(Path::Fused(Tier::Tiled)),
        PathChoice::FusedCoop => forced(Path::Fused(Tier::Coop)),
        PathChoice::Decode => forced(Path::Decode(decode::Form::for_problem(
            dev.adapter_info(),
            p,
        ))),
        PathChoice::DecodeWorkgroup => forced(Path::Decode(decode::Form::Workgroup)),
        PathChoice::Fused => fused_or_fallback(dev, p, weights, true, coop),
        PathChoice::Auto => fused_or_fallback(dev, p, weights, false, coop),
    }
}

/// Why a forced path runs: the caller forced it, and, where the tensor-core tier is forced
/// on inputs that are not f16 without [`Precision::F16`], that it multiplies them in f16
/// all the same, so that the plan says the error is that of f16 inputs.
fn forced_reason(path: Path, opts: &AttentionOptions<'_>, facts: InputFacts) -> String {
    let inputs = match facts.kv_half {
        _ if path != Path::Fused(Tier::Coop) || opts.precision == Precision::F16 => None,
        Some(HalfFormat::F16) => None,
        Some(HalfFormat::Bf16) => Some("bf16"),
        None => Some("f32"),
    };
    match inputs {
        Some(format) => format!(
            "forced by the caller: the tier multiplies these {format} inputs in f16 (f32 \
             accumulation), as with Precision::F16"
        ),
        None => "forced by the caller".to_string(),
    }
}

/// Auto (`explicit` false) or `PathChoice::Fused` (true): decode for few rows over many
/// keys, else the first fused tier that can run the problem, in order of measured speed on
/// this kind of adapter; when none can, an error if fused was asked for, else [`fall_back`].
fn fused_or_fallback(
    dev: &DeviceProfile,
    p: &Problem,
    weights: Option<String>,
    explicit: bool,
    coop: CoopAuto,
) -> Choice {
    let fall_back = |why: String| {
        if explicit {
            return Err(unavailable("fused", why));
        }
        fall_back(dev, p, why)
    };
    if let Some(why) = weights {
        return fall_back(why);
    }
    let d = &p.dims;
    let on_cpu = dev.adapter_info().device_type == wgpu::DeviceType::Cpu;
    let wide = fused::wide(p);
    let why_wide = format!(
        "the wider of D = {} and Dv = {} is above {}, which the fused tiers take through their wide variants",
        d.d,
        d.dv,
        fused::MAX_WIDTH
    );
    let rows = d.hq / d.hkv * d.lq;
    let cpu_subgroup_lanes = (on_cpu
        && path_obstacle(dev, p, Path::Fused(Tier::Subgroup)).is_none())
    .then(|| fused::subgroup_keys(dev.adapter_info()));
    let form = decode::Form::for_problem(dev.adapter_info(), p);
    // On CPU adapters, problems too wide for decode's invocation form take its workgroup
    // form for 1-2 rows per kv head where the subgroup tier's wide variant runs them
    // (decode::CPU_WIDE_DECODE_ROWS), else for few query positions, whatever the GQA group,
    // against the unfused path (decode::CPU_WIDE_AUTO_LQ).
    let cpu_wide = on_cpu && form == decode::Form::Workgroup;
    let max_rows = decode::auto_rows_at(cpu_subgroup_lanes, d.d.max(d.dv), d.lk);
    let decode_shape = if cpu_wide && cpu_subgroup_lanes.is_none() {
        d.lq <= decode::CPU_WIDE_AUTO_LQ && d.lk >= decode::MIN_AUTO_KEYS
    } else {
        decode::is_decode_shape(rows, d.lk, max_rows)
    };
    if !explicit && decode_shape && path_obstacle(dev, p, Path::Decode(form)).is_none() {
        let reason = if cpu_wide && cpu_subgroup_lanes.is_some() {
            format!(
                "{rows} query rows per kv head (at most {max_rows} here) over {} keys with D = {} and Dv = {}: split-K decode in its workgroup form (its invocation form takes widths up to {}; the subgroup tier measured faster from 4 rows per kv head)",
                d.lk,
                d.d,
                d.dv,
                decode::MAX_WIDTH
            )
        } else if cpu_wide {
            format!(
                "{} query positions (at most {} here) over {} keys with D = {} and Dv = {}: split-K decode in its workgroup form, the only one of decode's forms and the fused tiers here that takes widths above {}",
                d.lq,
                decode::CPU_WIDE_AUTO_LQ,
                d.lk,
                d.d,
                d.dv,
                decode::MAX_WIDTH
            )
        } else {
            format!(
                "{rows} query rows per kv head (at most {max_rows} here) over {} keys: split-K decode",
                d.lk
            )
        };
        return Ok((Path::Decode(form), reason));
    }
    // The cooperative-matrix tier first, where the inputs or the caller ask for f16 and it
    // can run (its f16 matrix units are an order of magnitude beyond the f32 tiers on GPUs
    // that have them: docs/h200.md).
    let mut passed_over = Vec::new();
    match coop {
        CoopAuto::Take => {
            return Ok((
                Path::Fused(Tier::Coop),
                "one fused kernel, O(L) memory; fused-coop: Q Kᵀ and P V on cooperative matrices in f16 with f32 accumulators".into(),
            ))
        }
        CoopAuto::PassedOver(why) => passed_over.push(format!("fused-coop: {why}")),
        CoopAuto::NotAsked => {}
    }
    // Tiers in order of measured speed on this kind of adapter (README "Measured", docs/h200.md): on CPU
    // adapters (lavapipe) subgroup broadcasts beat workgroup memory 5x (2-3x at D = 256); on
    // GPUs the tiled tier is 3.3x the portable one on an H200, and the subgroup tier is for
    // CPU adapters only (see fused::tier_obstacle).
    // Above 128, auto on a GPU takes the tiled tier or nothing fused: on an H200 at D = 256
    // the wide tiled variant ran level with the unfused path (18.9 against 19.2 ms) in O(L)
    // memory instead of O(L^2), the wide portable one 2.3x slower (44.6 ms).
    let tiled_only = wide && !on_cpu && !explicit;
    let order: &[Tier] = if on_cpu {
        &[Tier::Subgroup, Tier::Portable, Tier::Tiled]
    } else if tiled_only {
        &[Tier::Tiled]
    } else {
        &[Tier::Tiled, Tier::Portable]
    };
    // Beyond 256 the tiled tier runs D in longer loops and Dv on its widest variant, neither
    // yet measured against the unfused path on a GPU: auto leaves them to callers who ask for
    // a fused path (on CPU adapters the subgroup tier takes widths up to 640 first).
    let beyond_wide = fused::width_obstacle(p, fused::WIDE_MAX_WIDTH).is_some();
    for &tier in order {
        if tier == Tier::Tiled && !explicit && beyond_wide {
            passed_over.push(format!(
                "fused-tiled: takes D = {} and Dv = {} (above {}) only when a fused path is asked for, as its speed there is not yet measured against the unfused path",
                d.d,
                d.dv,
                fused::WIDE_MAX_WIDTH
            ));
            continue;
        }
        let Some(why) = path_obstacle(dev, p, Path::Fused(tier)) else {
            let mut reason = if wide && !on_cpu {
                format!("one fused kernel, O(L) memory; {why_wide}; on GPUs the wide fused-tiled measured level with the unfused path, which needs O(L^2)")
            } else if wide {
                format!("one fused kernel, O(L) memory; {why_wide}")
            } else {
                format!(
                    "one fused kernel, O(L) memory; {} tier, the fastest measured on {} adapters",
                    tier.name(),
                    if on_cpu { "CPU" } else { "GPU" }
                )
            };
            if !passed_over.is_empty() {
                reason = format!("{reason} that can run here ({})", passed_over.join("; "));
            }
            return Ok((Path::Fused(tier), reason));
        };
        passed_over.push(format!("{}: {why}", tier.name()));
    }
    if tiled_only {
        passed_over.push(
            "fused-portable: its wide variant measured 2.3x slower than the unfused path on GPUs"
                .into(),
        );
    }
    let fell_back = fall_back(passed_over.join("; "));
    // Where the unfused path cannot run either, auto takes a fused tier it passed over for
    // speed alone (the tiled tier above 256, the portable one's wide variant on GPUs).
    // Then decode, which runs any shape, slowly where rows are many.
    if let (Err(_), false) = (&fell_back, explicit) {
        if let Ok((path, reason)) = fused_or_fallback(dev, p, None, true, CoopAuto::NotAsked) {
            return Ok((
                path,
                format!("{reason}; taken as the unfused path cannot run here either"),
            ));
        }
        let forms = [
            decode::Form::for_problem(dev.adapter_info(), p),
            decode::Form::Workgroup,
        ];
        if let Some(form) = forms
            .into_iter()
            .find(|&form| path_obstacle(dev, p, Path::Decode(form)).is_none())
        {
            return Ok((
                Path::Decode(form),
                "split-K decode, as neither a fused tier nor the unfused path can run here".into(),
            ));
        }
    }
    fell_back
}

/// No fused tier can run the problem (`why`), or weights were asked for: the unfused path,
/// unless llvmpipe's loop limit stops it too (long rows), which is an error that gives both
/// reasons.
fn fall_back(dev: &DeviceProfile, p: &Problem, why: String) -> Choice {
    match path_obstacle(dev, p, Path::Unfused) {
        None => Ok((Path::Unfused, format!("fused unavailable: {why}"))),
        Some(unfused_why) => Err(unavailable(
            "auto",
            format!("fused: {why}; unfused: {unfused_why}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path the planner picks is in `Path::ALL` under a name of its own, and each
    /// listed path is what a forced `PathChoice` plans on some recorded profile: a family
    /// added without its line in the list, or listed with no way to force it, fails here.
    #[test]
    fn forced_paths_are_the_listed_paths() {
        let names: Vec<&str> = Path::ALL.iter().map(|p| p.name()).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "names: {names:?}");
        let dims =
            crate::problem::validate_dims(&[1, 4, 3, 64], &[1, 2, 100, 64], &[1, 2, 100, 64])
                .expect("dims");
        let p = Problem {
            dims,
            scale: 0.125,
            causal_offset: None,
            mask: None,
            kv_rows: 100,
            kv_first: 0,
            kv_half: None,
        };
        let mut planned = Vec::new();
        for (device, dev) in DeviceProfile::recorded() {
            for choice in PathChoice::FORCED {
                let opts = AttentionOptions::default().path(choice);
                match choose_path(&dev, &p, &opts, InputFacts::default()) {
                    Ok((path, _)) => {
                        assert!(
                            Path::ALL.contains(&path),
                            "{device}: {choice:?} planned {path:?}"
                        );
                        planned.push(path);
                    }
                    Err(Error::PathUnavailable { path, .. }) => {
                        assert!(
                            names.contains(&path),
                            "{device}: {choice:?} refused as {path}"
                        );
                    }
                    Err(e) => panic!("{device}: {choice:?}: {e}"),
                }
            }
        }
        for path in Path::ALL {
            assert!(planned.contains(&path), "{} is never planned", path.name());
        }
    }
}
