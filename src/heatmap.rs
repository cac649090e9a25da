//! Attention weights as a heatmap picture: one panel per head (or per sentence), token labels
//! on both axes, a colour bar and a title, drawn with the embedded font into a PNG.
//!
//! It stays on the raster [`Canvas`] rather than plotters (which draws the command-line
//! tool's bench chart): plotters is an optional dependency of the tool alone (feature `cli`),
//! a grid of coloured cells with labels needs nothing of a plotting library, and the
//! canvas's 5x8 bitmap font keeps short token labels crisp at the cell sizes used here.

use ndarray::{ArrayView2, Axis};

use crate::error::{Error, Result};
pub use crate::raster::{Canvas, Rgb};

/// One panel: a (queries x keys) weight matrix with its labels.
#[derive(Clone, Debug)]
pub struct Panel<'a> {
    /// Weights, rows = queries, columns = keys; values in [0, 1] for softmax weights.
    pub weights: ArrayView2<'a, f32>,
    /// One label per query row (may be empty: indices are shown).
    pub query_labels: Vec<String>,
    /// One label per key column (may be empty: indices are shown).
    pub key_labels: Vec<String>,
    /// Panel title, e.g. the head or the sentence.
    pub title: String,
}

const WHITE: Rgb = [255, 255, 255];
const INK: Rgb = [30, 30, 30];

/// Viridis-like colour map: dark blue (0) through green to yellow (1).
pub fn colormap(t: f32) -> Rgb {
    const STOPS: [(f32, Rgb); 5] = [
        (0.0, [68, 1, 84]),
        (0.25, [59, 82, 139]),
        (0.5, [33, 145, 140]),
        (0.75, [94, 201, 98]),
        (1.0, [253, 231, 37]),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    for pair in STOPS.windows(2) {
        let [(t0, c0), (t1, c1)] = [
            pair.first().copied().unwrap_or(STOPS[0]),
            pair.last().copied().unwrap_or(STOPS[4]),
        ];
        if t <= t1 {
            let f = (t - t0) / (t1 - t0);
            let mix =
                |a: u8, b: u8| (f32::from(a) + f * (f32::from(b) - f32::from(a))).round() as u8;
            return [mix(c0[0], c1[0]), mix(c0[1], c1[1]), mix(c0[2], c1[2])];
        }
    }
    STOPS[4].1
}

fn labels(given: &[String], n: usize) -> Vec<String> {
    if given.len() == n {
        given.to_vec()
    } else {
        (0..n).map(|i| i.to_string()).collect()
    }
}

/// Draws panels side by side (wrapping into a grid of up to 4 columns) under one title,
/// with a shared colour bar from 0 to the largest weight. Labels that do not match a
/// panel's size are replaced by indices.
pub fn render_panels(title: &str, panels: &[Panel<'_>]) -> Result<Canvas> {
    if panels.is_empty() {
        return Err(Error::InvalidOption {
            name: "panels",
            reason: "at least one panel is needed".into(),
        });
    }
    let max_q = panels
        .iter()
        .map(|p| p.weights.nrows())
        .max()
        .unwrap_or(1)
        .max(1);
    let max_k = panels
        .iter()
        .map(|p| p.weights.ncols())
        .max()
        .unwrap_or(1)
        .max(1);
    let label_len = |v: &[String]| v.iter().map(|s| s.chars().count()).max().unwrap_or(1);
    let q_label_w = panels
        .iter()
        .map(|p| label_len(&labels(&p.query_labels, p.weights.nrows())))
        .max()
        .unwrap_or(1);
    let k_label_w = panels
        .iter()
        .map(|p| label_len(&labels(&p.key_labels, p.weights.ncols())))
        .max()
        .unwrap_or(1);
    // Cells shrink for big matrices; values are printed when cells are large enough.
    let cell = (420 / max_q.max(max_k)).clamp(4, 48) as i64;
    let text_scale = if cell >= 24 { 2 } else { 1 };
    let left_pad = Canvas::text_width(&"m".repeat(q_label_w), text_scale) + 12;
    let top_pad = 24 + 7 * text_scale * k_label_w as i64 + 14; // panel title + stacked key labels
    let title_w = panels
        .iter()
        .map(|p| Canvas::text_width(&p.title, text_scale))
        .max()
        .unwrap_or(0);
    let panel_w = (left_pad + cell * max_k as i64).max(title_w) + 30;
    let panel_h = top_pad + cell * max_q as i64 + 20;
    let cols = panels.len().min(4) as i64;
    let rows = (panels.len() as i64 + cols - 1) / cols;
    let bar_w = 110;
    let bar_x = 20 + cols * panel_w;
    let width = (bar_x + bar_w).max(Canvas::text_width(title, 2) + 40);
    let height = 60 + rows * panel_h + 10;
    let mut c = Canvas::new(width as usize, height as usize, WHITE);
    c.text(20, 18, title, 2, INK);
    let vmax = panels
        .iter()
        .flat_map(|p| p.weights.iter().copied())
        .filter(|x| x.is_finite())
        .fold(0.0f32, f32::max)
        .max(1e-12);

    for (n, p) in panels.iter().enumerate() {
        let ox = 20 + (n as i64 % cols) * panel_w;
        let oy = 60 + (n as i64 / cols) * panel_h;
        c.text(ox, oy, &p.title, text_scale.max(1), INK);
        let (qn, kn) = (p.weights.nrows(), p.weights.ncols());
        let ql = labels(&p.query_labels, qn);
        let kl = labels(&p.key_labels, kn);
        let gx = ox + left_pad;
        let gy = oy + top_pad;
        for (i, row) in p.weights.axis_iter(Axis(0)).enumerate() {
            for (j, &w) in row.iter().enumerate() {
                let (x0, y0) = (gx + j as i64 * cell, gy + i as i64 * cell);
                let color = colormap(w / vmax);
                c.fill_rect(x0, y0, x0 + cell - 1, y0 + cell - 1, color);
                if cell >= 30 {
                    let v = format!("{w:.2}");
                    let luminance = 0.3 * f32::from(color[0])
                        + 0.59 * f32::from(color[1])
                        + 0.11 * f32::from(color[2]);
                    let ink = if luminance > 140.0 { INK } else { WHITE };
                    c.text(
                        x0 + (cell - Canvas::text_width(&v, 1)) / 2,
                        y0 + cell / 2 - 3,
                        &v,
                        1,
                        ink,
                    );
                }
            }
        }
        // Query labels on the left, right-aligned; key labels above, letters stacked.
        for (i, label) in ql.iter().enumerate() {
            let tw = Canvas::text_width(label, text_scale);
            c.text(
                gx - 8 - tw,
                gy + i as i64 * cell + (cell - 7 * text_scale) / 2,
                label,
                text_scale,
                INK,
            );
        }
        for (j, label) in kl.iter().enumerate() {
            let x = gx + j as i64 * cell + (cell - 5 * text_scale) / 2;
            for (t, ch) in label.chars().enumerate() {
                let y = gy - 8 - (label.chars().count() - t) as i64 * 8 * text_scale;
                c.text(x, y, &ch.to_string(), text_scale, INK);
            }
        }
    }
    // Colour bar.
    let bx = bar_x + 10;
    let (by, bh) = (80, (rows * panel_h - 60).max(120));
    for y in 0..bh {
        let t = 1.0 - y as f32 / bh as f32;
        c.fill_rect(bx, by + y, bx + 20, by + y + 1, colormap(t));
    }
    for k in 0..=4 {
        let t = k as f32 / 4.0;
        let y = by + ((1.0 - t) * bh as f32) as i64;
        c.fill_rect(bx + 20, y, bx + 26, y + 1, INK);
        c.text(bx + 30, y - 3, &format!("{:.2}", t * vmax), 1, INK);
    }
    c.text(bx - 4, by - 16, "weight", 1, INK);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    #[test]
    fn colormap_ends_and_clamps() {
        assert_eq!(colormap(0.0), [68, 1, 84]);
        assert_eq!(colormap(1.0), [253, 231, 37]);
        assert_eq!(colormap(-3.0), colormap(0.0));
        assert_eq!(colormap(f32::NAN), colormap(0.0));
    }

    #[test]
    fn panels_draw_cells_in_the_map_colours() {
        let w = Array2::from_shape_fn((3, 4), |(i, j)| if i == j { 1.0 } else { 0.0 });
        let panel = Panel {
            weights: w.view(),
            query_labels: vec!["a".into(), "b".into(), "c".into()],
            key_labels: vec![],
            title: "t".into(),
        };
        let c = render_panels("title", &[panel.clone(), panel]).expect("render");
        assert!(c.width() > 100 && c.height() > 100);
        // Both extremes of the map appear: the diagonal (1.0) and the rest (0.0).
        let mut seen = (false, false);
        for y in 0..c.height() {
            for x in 0..c.width() {
                let p = c.get(x, y);
                seen.0 |= p == Some(colormap(1.0));
                seen.1 |= p == Some(colormap(0.0));
            }
        }
        assert!(seen.0 && seen.1);
        assert!(render_panels("empty", &[]).is_err());
    }
}
