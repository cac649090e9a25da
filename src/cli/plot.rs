//! A line chart: one series per path, x on a log2 scale, a legend, axis labels, a title.

use wgpu_attention::heatmap::{Canvas, Rgb};

const WHITE: Rgb = [255, 255, 255];
const INK: Rgb = [30, 30, 30];
const GRID: Rgb = [225, 225, 225];
const COLORS: [Rgb; 6] = [
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
];

/// Draws `series` (name, [(x, y)]) as lines with markers; x on a log2 axis.
pub fn line_chart(
    title: &str,
    subtitle: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(usize, f64)>)],
) -> Canvas {
    let (w, h) = (960usize, 600usize);
    let mut c = Canvas::new(w, h, WHITE);
    let (left, right, top, bottom) = (90.0, 230.0, 70.0, 70.0);
    let (pw, ph) = (w as f64 - left - right, h as f64 - top - bottom);
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| (x.max(1) as f64).log2()))
        .collect();
    let (x_min, x_max) = xs
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    let (x_min, x_max) = if x_min < x_max {
        (x_min, x_max)
    } else {
        (x_min - 1.0, x_min + 1.0)
    };
    let y_top = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(0.0f64, f64::max);
    let y_step = nice_step(y_top / 5.0);
    let y_max = (y_top / y_step).ceil().max(1.0) * y_step;
    let px = |x: f64| left + (x - x_min) / (x_max - x_min) * pw;
    let py = |y: f64| top + ph - y / y_max * ph;

    c.text(left as i64, 18, title, 2, INK);
    c.text(left as i64, 44, subtitle, 1, INK);
    // Grid and y ticks.
    let mut y = 0.0;
    while y <= y_max + 1e-9 {
        c.line(left, py(y), left + pw, py(y), 1, GRID);
        let label = if y_step >= 1.0 {
            format!("{y:.0}")
        } else {
            format!("{y:.2}")
        };
        c.text(
            left as i64 - 8 - Canvas::text_width(&label, 1),
            py(y) as i64 - 3,
            &label,
            1,
            INK,
        );
        y += y_step;
    }
    // x ticks at every measured length.
    let mut ticks: Vec<usize> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
        .collect();
    ticks.sort_unstable();
    ticks.dedup();
    for &t in &ticks {
        let x = px((t.max(1) as f64).log2());
        c.line(x, top, x, top + ph, 1, GRID);
        let label = t.to_string();
        c.text(
            x as i64 - Canvas::text_width(&label, 1) / 2,
            (top + ph) as i64 + 8,
            &label,
            1,
            INK,
        );
    }
    c.line(left, top, left, top + ph, 2, INK);
    c.line(left, top + ph, left + pw, top + ph, 2, INK);
    c.text(
        (left + pw / 2.0) as i64 - Canvas::text_width(x_label, 2) / 2,
        h as i64 - 36,
        x_label,
        2,
        INK,
    );
    // Vertical y label: letters stacked.
    for (i, ch) in y_label.chars().enumerate() {
        c.text(18, top as i64 + 20 + i as i64 * 18, &ch.to_string(), 2, INK);
    }
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts = pts.clone();
        pts.sort_by_key(|&(x, _)| x);
        for pair in pts.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            c.line(
                px((a.0 as f64).log2()),
                py(a.1),
                px((b.0 as f64).log2()),
                py(b.1),
                3,
                color,
            );
        }
        for &(x, y) in &pts {
            let (cx, cy) = (px((x.max(1) as f64).log2()) as i64, py(y) as i64);
            c.fill_rect(cx - 4, cy - 4, cx + 5, cy + 5, color);
        }
        let ly = top as i64 + 10 + i as i64 * 26;
        let lx = (left + pw) as i64 + 24;
        c.fill_rect(lx, ly, lx + 22, ly + 14, color);
        c.text(lx + 30, ly + 1, name, 2, INK);
    }
    c
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * p)
}
