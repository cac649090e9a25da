//! `bench`'s output: the table (or one JSON object per path) and the number formats of the
//! JSON lines.

use wgpu_attention::Context;

use super::inputs::{MaskKind, Settings};
use super::{Row, Shape};

pub(super) fn print_table(
    ctx: &Context,
    sh: &Shape,
    settings: &Settings,
    table: &[Row],
    gpu_timing: bool,
    json: bool,
    checked_rows: usize,
) {
    let causal = settings.causal;
    let mask = match settings.mask {
        None => String::new(),
        Some(MaskKind::Padding) => format!(" mask padding (bool {},1,1,{})", sh.b, sh.lk),
        Some(MaskKind::FinfoPadding) => {
            format!(
                " mask finfo-padding (float 0/f32::MIN {},1,1,{})",
                sh.b, sh.lk
            )
        }
        Some(MaskKind::Bool) => format!(" mask bool ({},{})", sh.lq, sh.lk),
        Some(MaskKind::Bias) => format!(" mask bias (float {},{})", sh.lq, sh.lk),
        Some(MaskKind::Window) => format!(" mask window of 256 (bool {},{})", sh.lq, sh.lk),
    };
    let shape = format!(
        "B{} Hq{} Hkv{} Lq{} Lk{} D{}{mask}",
        sh.b, sh.hq, sh.hkv, sh.lq, sh.lk, sh.d
    );
    if json {
        for r in table {
            println!(
                "{{\"path\": \"{}\", \"ms\": {}, \"wall_ms\": {}, \"gpu_ms\": {}, \"gflops\": {}, \"gbps\": {}, \"max_abs_err\": {}, \"shape\": \"{}\", \"causal\": \"{:?}\", \"mask\": \"{}\", \"adapter\": \"{}\", \"notes\": \"{}\"}}",
                r.path,
                json_number(r.timing.median_gpu_ms().unwrap_or(r.timing.median_ms()), 4),
                json_number(r.timing.median_ms(), 4),
                r.timing.median_gpu_ms().map_or("null".to_string(), |g| json_number(g, 4)),
                json_number(r.gflops, 3),
                json_number(r.gbps, 3),
                json_error(r.max_abs_err),
                shape,
                causal,
                settings.mask.map_or("none", MaskKind::name),
                json_text(&ctx.adapter_name()),
                json_text(&r.note),
            );
        }
        return;
    }
    println!("{shape} causal {causal:?} on {}", ctx.adapter_name());
    println!(
        "time: median of the runs, {}; error: max |gpu - reference| over {checked_rows} checked query rows",
        if gpu_timing { "GPU timestamps (wall clock beside)" } else { "wall clock (no GPU timestamps)" }
    );
    println!(
        "{:<16} {:>10} {:>10} {:>10} {:>9} {:>11}  notes",
        "path", "ms", "wall ms", "GFLOP/s", "GB/s", "max err"
    );
    for r in table {
        let ms = r.timing.median_gpu_ms().unwrap_or(r.timing.median_ms());
        println!(
            "{:<16} {:>10.3} {:>10.3} {:>10.2} {:>9.2} {:>11.3e}  {}",
            r.path,
            ms,
            r.timing.median_ms(),
            r.gflops,
            r.gbps,
            r.max_abs_err,
            r.note
        );
    }
}

/// A number for the JSON lines: `digits` decimals, or `null` where it is not finite (JSON
/// has no NaN or infinity; a NaN error means the output held NaN where it was checked).
pub(super) fn json_number(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "null".to_string()
    }
}

/// The max error for the JSON lines, in exponent form, or `null` where it is not finite.
pub(super) fn json_error(x: f64) -> String {
    if x.is_finite() {
        format!("{x:e}")
    } else {
        "null".to_string()
    }
}

/// Text for a JSON string's inside: quotes and backslashes escaped, control characters as
/// spaces.
pub(super) fn json_text(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '"' | '\\' => vec!['\\', c],
            c if c.is_control() => vec![' '],
            c => vec![c],
        })
        .collect()
}

/// Whether stderr is not a terminal (then the sweep stays quiet).
pub(super) fn json_quiet() -> bool {
    use std::io::IsTerminal;
    !std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::{json_error, json_number, json_text};

    #[test]
    fn json_numbers_are_valid_json() {
        assert_eq!(json_number(1.23456, 3), "1.235");
        assert_eq!(json_number(f64::NAN, 3), "null");
        assert_eq!(json_number(f64::INFINITY, 4), "null");
        assert_eq!(json_error(2.5e-7), "2.5e-7");
        assert_eq!(json_error(f64::NAN), "null");
        assert_eq!(json_error(f64::NEG_INFINITY), "null");
        assert_eq!(json_text("a \"b\" c\\d\ne"), "a \\\"b\\\" c\\\\d e");
    }
}
