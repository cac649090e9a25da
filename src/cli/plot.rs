//! `bench --plot`'s line chart, drawn with plotters: one series per path, x on a log scale
//! with a tick at every measured length, a legend beside the plot, axis titles, a title and
//! the adapter. Plotters draws into an RGB buffer (its bitmap backend), which becomes a
//! [`Canvas`] and is saved as PNG by the `png` crate; the text is DejaVu Sans, embedded in
//! the binary (assets/, with its licence), so no system font is looked up.
//!
//! The text goes through [`ChartBackend`], the bitmap backend with its own `draw_text`:
//! plotters 0.3.7's ab_glyph text drops each glyph's left side bearing (letters unevenly
//! spaced: "adap ter") and anchors rotated text before turning it, which put upright tick
//! labels across the axis.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle, FontTransform};
// BackendStyle stays unimported: its stroke_width would shadow plotters' Color's.
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind};
use wgpu_attention::heatmap::Canvas;

use super::Failure;

/// DejaVu Sans cut down to Latin-1 and a little punctuation (assets/README.md says how).
const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans-subset.ttf");
/// The family name the chart's text asks plotters for.
const FAMILY: &str = "sans-serif";

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 620;
/// Room on the right for the legend.
const LEGEND_WIDTH: u32 = 230;

const INK: RGBColor = RGBColor(30, 30, 30);
const MUTED: RGBColor = RGBColor(90, 90, 90);
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The bitmap backend, with text drawn here: each glyph where its outline lies (side
/// bearing included) and rotated text turned about its anchor, as plotters means it (the
/// anchor is a point of the text's own box: the y axis title, anchored top-centre and turned
/// 270 degrees, reads upwards beside the axis).
struct ChartBackend<'a> {
    bitmap: BitMapBackend<'a>,
    font: FontRef<'static>,
}

/// A pixel of text: x, y and how much of it the glyph covers (0 to 1).
type Coverage = (i32, i32, f32);

type BackendError<'a> = DrawingErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>;

impl<'a> ChartBackend<'a> {
    fn new(buffer: &'a mut [u8], size: (u32, u32)) -> Result<Self, Failure> {
        let font = FontRef::try_from_slice(FONT).map_err(drawing)?;
        Ok(ChartBackend {
            bitmap: BitMapBackend::with_buffer(buffer, size),
            font,
        })
    }

    /// `text` at `size` px: its box (width, height) and its pixels' coverage, relative to
    /// the box's top-left corner.
    fn rasterize(&self, text: &str, size: f64) -> ((i32, i32), Vec<Coverage>) {
        let scale = PxScale::from(size as f32);
        let font = self.font.as_scaled(scale);
        let (mut caret, mut previous, mut pixels) = (0.0f32, None, Vec::new());
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = previous {
                caret += font.kern(p, id);
            }
            let glyph = id.with_scale_and_position(scale, ab_glyph::point(caret, font.ascent()));
            if let Some(outline) = self.font.outline_glyph(glyph) {
                let bounds = outline.px_bounds();
                let (x0, y0) = (bounds.min.x as i32, bounds.min.y as i32);
                outline.draw(|x, y, coverage| {
                    pixels.push((x0 + x as i32, y0 + y as i32, coverage));
                });
            }
            caret += font.h_advance(id);
            previous = Some(id);
        }
        let height = font.ascent() - font.descent();
        ((caret.ceil() as i32, height.ceil() as i32), pixels)
    }
}

impl<'a> DrawingBackend for ChartBackend<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.bitmap.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), BackendError<'a>> {
        self.bitmap.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), BackendError<'a>> {
        self.bitmap.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), BackendError<'a>> {
        self.bitmap.draw_pixel(point, color)
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), BackendError<'a>> {
        self.bitmap.draw_line(from, to, style)
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), BackendError<'a>> {
        self.bitmap.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), BackendError<'a>> {
        self.bitmap.blit_bitmap(pos, size, src)
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> Result<(), BackendError<'a>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let ((width, height), pixels) = self.rasterize(text, style.size());
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0,
            HPos::Center => -width / 2,
            HPos::Right => -width,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let turn = style.transform();
        for (x, y, coverage) in pixels {
            if coverage <= 0.0 {
                continue;
            }
            let (x, y) = turn.transform(x + dx, y + dy);
            self.bitmap.draw_pixel(
                (pos.0 + x, pos.1 + y),
                color.mix(f64::from(coverage.min(1.0))),
            )?;
        }
        Ok(())
    }

    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), BackendError<'a>> {
        let ((width, height), _) = self.rasterize(text, style.size());
        Ok((width.max(0) as u32, height.max(0) as u32))
    }
}

/// Registers the embedded font with plotters, once.
fn font() -> Result<(), Failure> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(Failure {
            code: 1,
            message: "the chart's embedded font could not be read".into(),
        })
    }
}

/// A plotting failure as the tool reports it.
fn drawing<E: std::fmt::Display>(e: E) -> Failure {
    Failure {
        code: 1,
        message: format!("cannot draw the chart: {e}"),
    }
}

/// Draws `series` (name, [(x, y)]) as lines with markers, x on a log axis with a tick at
/// each measured x (labels turned upright when they would not fit side by side).
pub fn line_chart(
    title: &str,
    subtitle: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(usize, f64)>)],
) -> Result<Canvas, Failure> {
    font()?;
    let mut ticks: Vec<usize> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x.max(1)))
        .collect();
    ticks.sort_unstable();
    ticks.dedup();
    let (x_lo, x_hi) = match (ticks.first(), ticks.last()) {
        (Some(&lo), Some(&hi)) if lo < hi => (lo as f64 / 1.2, hi as f64 * 1.2),
        (Some(&x), _) => (x as f64 / 2.0, x as f64 * 2.0),
        _ => (1.0, 2.0),
    };
    let y_top = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .filter(|y| y.is_finite())
        .fold(0.0f64, f64::max);
    let y_max = if y_top > 0.0 { y_top * 1.08 } else { 1.0 };
    // Upright x labels where they would crowd: the widest label against the room per tick
    // (about 0.6 em a digit at 15 px).
    let plot_width = f64::from(WIDTH - LEGEND_WIDTH - 110);
    let widest = ticks.iter().map(|t| t.to_string().len()).max().unwrap_or(1) as f64 * 9.0;
    let upright = widest + 12.0 > plot_width / ticks.len().max(1) as f64;
    let tick_label = |x: &f64| format!("{}", x.round() as u64);

    let mut buffer = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = ChartBackend::new(&mut buffer, (WIDTH, HEIGHT))?.into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        root.draw(&Text::new(
            title.to_string(),
            (24, 16),
            (FAMILY, 24).into_font().color(&INK),
        ))
        .map_err(drawing)?;
        root.draw(&Text::new(
            subtitle.to_string(),
            (24, 48),
            (FAMILY, 15).into_font().color(&MUTED),
        ))
        .map_err(drawing)?;
        let body = root.margin(76, 10, 10, 10);
        let (plot_area, legend_area) = body.split_horizontally(WIDTH - 20 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&plot_area)
            .margin(12)
            .x_label_area_size(if upright { 90 } else { 60 })
            .y_label_area_size(80)
            .build_cartesian_2d(
                (x_lo..x_hi)
                    .log_scale()
                    .with_key_points(ticks.iter().map(|&t| t as f64).collect()),
                0.0..y_max,
            )
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .axis_desc_style((FAMILY, 18).into_font().color(&INK))
            .label_style((FAMILY, 15).into_font().color(&INK))
            // Upright labels are drawn below, each ending at its tick.
            .x_label_formatter(&|x| {
                if upright {
                    String::new()
                } else {
                    tick_label(x)
                }
            })
            .y_label_formatter(&|y| match y_max {
                m if m >= 20.0 => format!("{y:.0}"),
                m if m >= 2.0 => format!("{y:.1}"),
                _ => format!("{y:.2}"),
            })
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(WHITE)
            .axis_style(INK.stroke_width(2))
            .draw()
            .map_err(drawing)?;
        if upright {
            let style = TextStyle::from((FAMILY, 15).into_font())
                .color(&INK)
                .transform(FontTransform::Rotate270)
                .pos(Pos::new(HPos::Right, VPos::Center));
            for &t in &ticks {
                let (x, y) = chart.backend_coord(&(t as f64, 0.0));
                root.draw(&Text::new(
                    tick_label(&(t as f64)),
                    (x, y + 10),
                    style.clone(),
                ))
                .map_err(drawing)?;
            }
        }
        for (i, (name, points)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut points: Vec<(f64, f64)> =
                points.iter().map(|&(x, y)| (x.max(1) as f64, y)).collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(3)))
                .map_err(drawing)?;
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 5, color.filled())))
                .map_err(drawing)?;
            // The legend: a swatch and the path's name, one row each, beside the plot.
            let y = 20 + i as i32 * 30;
            legend_area
                .draw(&Rectangle::new([(12, y), (36, y + 16)], color.filled()))
                .map_err(drawing)?;
            legend_area
                .draw(&Text::new(
                    name.clone(),
                    (46, y),
                    (FAMILY, 17).into_font().color(&INK),
                ))
                .map_err(drawing)?;
        }
        root.present().map_err(drawing)?;
    }
    Canvas::from_rgb(WIDTH as usize, HEIGHT as usize, buffer).ok_or_else(|| Failure {
        code: 1,
        message: "the chart's buffer has the wrong size".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(lengths: &[usize]) -> Vec<(String, Vec<(usize, f64)>)> {
        ["unfused", "fused-subgroup", "cpu-ndarray"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let pts = lengths
                    .iter()
                    .map(|&l| (l, (i + 1) as f64 * (l as f64).log2()))
                    .collect();
                (name.to_string(), pts)
            })
            .collect()
    }

    fn has(c: &Canvas, color: RGBColor) -> bool {
        (0..c.height())
            .any(|y| (0..c.width()).any(|x| c.get(x, y) == Some([color.0, color.1, color.2])))
    }

    /// Set PLOT_TEST_DIR to a folder to look at the charts.
    #[test]
    fn charts_draw_every_series_and_text() -> Result<(), Failure> {
        let few = [128, 256, 512, 1024];
        let many: Vec<usize> = (7..=17).map(|p| 1usize << p).collect();
        for lengths in [&few[..], &many[..], &[300][..]] {
            let c = line_chart(
                "GFLOP/s vs length",
                "adapter",
                "length",
                "GFLOP/s",
                &sweep(lengths),
            )?;
            assert_eq!((c.width(), c.height()), (WIDTH as usize, HEIGHT as usize));
            for color in &COLORS[..3] {
                assert!(
                    has(&c, *color),
                    "{lengths:?}: series colour {color:?} missing"
                );
            }
            assert!(has(&c, INK), "{lengths:?}: no text");
            if let Ok(dir) = std::env::var("PLOT_TEST_DIR") {
                c.save_png(format!("{dir}/chart-{}.png", lengths.len()))
                    .map_err(Failure::from_error)?;
            }
        }
        Ok(())
    }
}
