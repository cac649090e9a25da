//! `bench --plot`: GFLOP/s of each path against sequence length, drawn as a line chart.

use wgpu_attention::{Causal, Context, PathChoice};

use super::inputs::{prepare, Settings};
use super::measure::{measure, Notes};
use super::report::json_quiet;
use super::Shape;
use crate::cli::progress::Progress;
use crate::cli::Failure;

/// GFLOP/s against sequence length: lengths from 128 doubling up to the shape's (Lq follows
/// Lk unless the shape is decode-like, Lq < 64, where it stays fixed).
pub(super) fn plot_sweep(
    ctx: &Context,
    sh: Shape,
    settings: &Settings,
    chosen: &[(String, Option<PathChoice>)],
    reps: usize,
    file: &str,
) -> Result<(), Failure> {
    let causal = settings.causal;
    let top = sh.lk.max(sh.lq);
    let mut lengths = Vec::new();
    let mut l = 128usize.min(top);
    while l < top {
        lengths.push(l);
        l *= 2;
    }
    lengths.push(top);
    let mut series: Vec<(String, Vec<(usize, f64)>)> = Vec::new();
    let progress = Progress::bar(lengths.len() * chosen.len(), "--plot sweep");
    let notes = Notes {
        quiet: true,
        progress: &progress,
    };
    for &len in &lengths {
        let lq = if sh.lq < 64 { sh.lq } else { len };
        let point = Shape { lq, lk: len, ..sh };
        progress.working_on(format!("length {len}: inputs and reference"));
        let x = prepare(ctx, point, settings)?;
        for (name, choice) in chosen {
            progress.working_on(format!("length {len}: {name}"));
            if let Some(row) = measure(ctx, &x, name, *choice, reps, &notes)? {
                match series.iter_mut().find(|(n, _)| *n == row.path) {
                    Some((_, pts)) => pts.push((len, row.gflops)),
                    None => series.push((row.path.clone(), vec![(len, row.gflops)])),
                }
            }
            progress.step();
        }
    }
    progress.finish();
    let title = format!(
        "GFLOP/s vs sequence length: B{} Hq{} Hkv{} D{}{}",
        sh.b,
        sh.hq,
        sh.hkv,
        sh.d,
        if causal == Causal::None {
            String::new()
        } else {
            format!(" causal {causal:?}")
        }
    );
    let canvas = crate::cli::plot::line_chart(
        &title,
        &ctx.adapter_name(),
        "sequence length (Lk)",
        "GFLOP/s",
        &series,
    )?;
    canvas.save_png(file).map_err(Failure::from_error)?;
    if !json_quiet() {
        eprintln!("plot written to {file}");
    }
    Ok(())
}
