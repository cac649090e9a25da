//! A small RGB canvas with lines, rectangles and text in an embedded 5x7 bitmap font, saved
//! as PNG (compressed by the `png` crate). Enough for the attention heatmaps with no system
//! font.

use std::path::Path;

use crate::error::{Error, Result};

/// An RGB colour.
pub type Rgb = [u8; 3];

/// An image of `width x height` RGB pixels, row-major, origin top-left.
#[derive(Clone, Debug)]
pub struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

/// The classic 5x8 font for ASCII 32..=126: five columns per glyph, bit 0 at the top; capitals
/// and digits use 7 rows, descenders (g, j, p, q, y) the eighth.
const FONT: [[u8; 5]; 95] = [
    [0x00, 0x00, 0x00, 0x00, 0x00],
    [0x00, 0x00, 0x5F, 0x00, 0x00],
    [0x00, 0x07, 0x00, 0x07, 0x00],
    [0x14, 0x7F, 0x14, 0x7F, 0x14],
    [0x24, 0x2A, 0x7F, 0x2A, 0x12],
    [0x23, 0x13, 0x08, 0x64, 0x62],
    [0x36, 0x49, 0x55, 0x22, 0x50],
    [0x00, 0x05, 0x03, 0x00, 0x00],
    [0x00, 0x1C, 0x22, 0x41, 0x00],
    [0x00, 0x41, 0x22, 0x1C, 0x00],
    [0x08, 0x2A, 0x1C, 0x2A, 0x08],
    [0x08, 0x08, 0x3E, 0x08, 0x08],
    [0x00, 0x50, 0x30, 0x00, 0x00],
    [0x08, 0x08, 0x08, 0x08, 0x08],
    [0x00, 0x60, 0x60, 0x00, 0x00],
    [0x20, 0x10, 0x08, 0x04, 0x02],
    [0x3E, 0x51, 0x49, 0x45, 0x3E],
    [0x00, 0x42, 0x7F, 0x40, 0x00],
    [0x42, 0x61, 0x51, 0x49, 0x46],
    [0x21, 0x41, 0x45, 0x4B, 0x31],
    [0x18, 0x14, 0x12, 0x7F, 0x10],
    [0x27, 0x45, 0x45, 0x45, 0x39],
    [0x3C, 0x4A, 0x49, 0x49, 0x30],
    [0x01, 0x71, 0x09, 0x05, 0x03],
    [0x36, 0x49, 0x49, 0x49, 0x36],
    [0x06, 0x49, 0x49, 0x29, 0x1E],
    [0x00, 0x36, 0x36, 0x00, 0x00],
    [0x00, 0x56, 0x36, 0x00, 0x00],
    [0x08, 0x14, 0x22, 0x41, 0x00],
    [0x14, 0x14, 0x14, 0x14, 0x14],
    [0x00, 0x41, 0x22, 0x14, 0x08],
    [0x02, 0x01, 0x51, 0x09, 0x06],
    [0x32, 0x49, 0x79, 0x41, 0x3E],
    [0x7E, 0x11, 0x11, 0x11, 0x7E],
    [0x7F, 0x49, 0x49, 0x49, 0x36],
    [0x3E, 0x41, 0x41, 0x41, 0x22],
    [0x7F, 0x41, 0x41, 0x22, 0x1C],
    [0x7F, 0x49, 0x49, 0x49, 0x41],
    [0x7F, 0x09, 0x09, 0x01, 0x01],
    [0x3E, 0x41, 0x41, 0x51, 0x32],
    [0x7F, 0x08, 0x08, 0x08, 0x7F],
    [0x00, 0x41, 0x7F, 0x41, 0x00],
    [0x20, 0x40, 0x41, 0x3F, 0x01],
    [0x7F, 0x08, 0x14, 0x22, 0x41],
    [0x7F, 0x40, 0x40, 0x40, 0x40],
    [0x7F, 0x02, 0x04, 0x02, 0x7F],
    [0x7F, 0x04, 0x08, 0x10, 0x7F],
    [0x3E, 0x41, 0x41, 0x41, 0x3E],
    [0x7F, 0x09, 0x09, 0x09, 0x06],
    [0x3E, 0x41, 0x51, 0x21, 0x5E],
    [0x7F, 0x09, 0x19, 0x29, 0x46],
    [0x46, 0x49, 0x49, 0x49, 0x31],
    [0x01, 0x01, 0x7F, 0x01, 0x01],
    [0x3F, 0x40, 0x40, 0x40, 0x3F],
    [0x1F, 0x20, 0x40, 0x20, 0x1F],
    [0x7F, 0x20, 0x18, 0x20, 0x7F],
    [0x63, 0x14, 0x08, 0x14, 0x63],
    [0x03, 0x04, 0x78, 0x04, 0x03],
    [0x61, 0x51, 0x49, 0x45, 0x43],
    [0x00, 0x7F, 0x41, 0x41, 0x00],
    [0x02, 0x04, 0x08, 0x10, 0x20],
    [0x00, 0x41, 0x41, 0x7F, 0x00],
    [0x04, 0x02, 0x01, 0x02, 0x04],
    [0x40, 0x40, 0x40, 0x40, 0x40],
    [0x00, 0x01, 0x02, 0x04, 0x00],
    [0x20, 0x54, 0x54, 0x54, 0x78],
    [0x7F, 0x48, 0x44, 0x44, 0x38],
    [0x38, 0x44, 0x44, 0x44, 0x20],
    [0x38, 0x44, 0x44, 0x48, 0x7F],
    [0x38, 0x54, 0x54, 0x54, 0x18],
    [0x08, 0x7E, 0x09, 0x01, 0x02],
    [0x18, 0xA4, 0xA4, 0xA4, 0x7C],
    [0x7F, 0x08, 0x04, 0x04, 0x78],
    [0x00, 0x44, 0x7D, 0x40, 0x00],
    [0x40, 0x80, 0x84, 0x7D, 0x00],
    [0x00, 0x7F, 0x10, 0x28, 0x44],
    [0x00, 0x41, 0x7F, 0x40, 0x00],
    [0x7C, 0x04, 0x18, 0x04, 0x78],
    [0x7C, 0x08, 0x04, 0x04, 0x78],
    [0x38, 0x44, 0x44, 0x44, 0x38],
    [0xFC, 0x24, 0x24, 0x24, 0x18],
    [0x18, 0x24, 0x24, 0x18, 0xFC],
    [0x7C, 0x08, 0x04, 0x04, 0x08],
    [0x48, 0x54, 0x54, 0x54, 0x20],
    [0x04, 0x3F, 0x44, 0x40, 0x20],
    [0x3C, 0x40, 0x40, 0x20, 0x7C],
    [0x1C, 0x20, 0x40, 0x20, 0x1C],
    [0x3C, 0x40, 0x30, 0x40, 0x3C],
    [0x44, 0x28, 0x10, 0x28, 0x44],
    [0x1C, 0xA0, 0xA0, 0xA0, 0x7C],
    [0x44, 0x64, 0x54, 0x4C, 0x44],
    [0x00, 0x08, 0x36, 0x41, 0x00],
    [0x00, 0x00, 0x7F, 0x00, 0x00],
    [0x00, 0x41, 0x36, 0x08, 0x00],
    [0x02, 0x01, 0x02, 0x04, 0x02],
];

impl Canvas {
    /// A canvas filled with `background`.
    pub fn new(width: usize, height: usize, background: Rgb) -> Self {
        let mut pixels = Vec::with_capacity(width * height * 3);
        for _ in 0..width * height {
            pixels.extend_from_slice(&background);
        }
        Canvas {
            width,
            height,
            pixels,
        }
    }

    /// A canvas holding `pixels`: `width x height` RGB triples, row-major, origin top-left
    /// (what other drawing code, such as a plotting library's bitmap, leaves in a buffer).
    /// `None` when the buffer's length is not `width * height * 3`.
    pub fn from_rgb(width: usize, height: usize, pixels: Vec<u8>) -> Option<Self> {
        let expected = width.checked_mul(height)?.checked_mul(3)?;
        (pixels.len() == expected).then_some(Canvas {
            width,
            height,
            pixels,
        })
    }

    /// Width in pixels.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// Sets one pixel; coordinates outside the canvas are ignored.
    pub fn set(&mut self, x: i64, y: i64, color: Rgb) {
        if x < 0 || y < 0 || x as usize >= self.width || y as usize >= self.height {
            return;
        }
        let at = (y as usize * self.width + x as usize) * 3;
        if let Some(px) = self.pixels.get_mut(at..at + 3) {
            px.copy_from_slice(&color);
        }
    }

    /// The colour at (x, y), if inside.
    pub fn get(&self, x: usize, y: usize) -> Option<Rgb> {
        let at = (y * self.width + x) * 3;
        self.pixels.get(at..at + 3)?.try_into().ok()
    }

    /// Fills the rectangle [x0, x1) x [y0, y1).
    pub fn fill_rect(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, color: Rgb) {
        for y in y0..y1 {
            for x in x0..x1 {
                self.set(x, y, color);
            }
        }
    }

    /// A line `thickness` pixels wide from (x0, y0) to (x1, y1).
    pub fn line(&mut self, x0: f64, y0: f64, x1: f64, y1: f64, thickness: i64, color: Rgb) {
        let steps = (x1 - x0).abs().max((y1 - y0).abs()).ceil().max(1.0) as i64;
        let half = thickness / 2;
        for s in 0..=steps {
            let t = s as f64 / steps as f64;
            let (x, y) = (
                (x0 + t * (x1 - x0)).round() as i64,
                (y0 + t * (y1 - y0)).round() as i64,
            );
            self.fill_rect(
                x - half,
                y - half,
                x - half + thickness,
                y - half + thickness,
                color,
            );
        }
    }

    /// Text at (x, y) (top-left), each font pixel drawn as a `scale x scale` square.
    /// Characters outside printable ASCII are drawn as '?'.
    pub fn text(&mut self, x: i64, y: i64, s: &str, scale: i64, color: Rgb) {
        for (i, ch) in s.chars().enumerate() {
            let code = if (' '..='~').contains(&ch) {
                ch as usize - 32
            } else {
                '?' as usize - 32
            };
            let glyph = FONT.get(code).copied().unwrap_or([0; 5]);
            let gx = x + i as i64 * 6 * scale;
            for (col, bits) in glyph.iter().enumerate() {
                for row in 0..8 {
                    if bits >> row & 1 == 1 {
                        let px = gx + col as i64 * scale;
                        let py = y + row as i64 * scale;
                        self.fill_rect(px, py, px + scale, py + scale, color);
                    }
                }
            }
        }
    }

    /// Width in pixels of `s` drawn by [`Canvas::text`] at `scale`.
    pub fn text_width(s: &str, scale: i64) -> i64 {
        (s.chars().count() as i64 * 6 - 1).max(0) * scale
    }

    /// Encodes as PNG: 8-bit RGB, compressed (the `png` crate's adaptive filters and
    /// deflate). A canvas with no pixels (zero width or height), which PNG cannot hold,
    /// gives an empty vector; [`Canvas::save_png`] refuses it.
    pub fn to_png(&self) -> Vec<u8> {
        self.encode().unwrap_or_default()
    }

    fn encode(&self) -> std::result::Result<Vec<u8>, png::EncodingError> {
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, self.width as u32, self.height as u32);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        // The pictures are flat colours and text: High costs milliseconds more than the
        // default and saves a few percent.
        encoder.set_compression(png::Compression::High);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(&self.pixels)?;
        writer.finish()?;
        Ok(out)
    }

    /// Writes the PNG to `path`.
    pub fn save_png(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let failed = |reason: String| Error::Npy {
            path: path.display().to_string(),
            reason,
        };
        let png = self
            .encode()
            .map_err(|e| failed(format!("cannot encode the image: {e}")))?;
        std::fs::write(path, png).map_err(|e| failed(format!("cannot write the image: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_round_trips() {
        let mut c = Canvas::new(3, 2, [1, 2, 3]);
        c.set(2, 1, [250, 128, 7]);
        let png = c.to_png();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        // IHDR: width 3, height 2, 8-bit RGB.
        assert_eq!(&png[16..29], &[0, 0, 0, 3, 0, 0, 0, 2, 8, 2, 0, 0, 0]);
        assert!(png.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82]));
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let mut reader = decoder.read_info().expect("a PNG");
        let mut pixels = vec![0; reader.output_buffer_size().expect("size")];
        let info = reader.next_frame(&mut pixels).expect("a frame");
        assert_eq!((info.width, info.height), (3, 2));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        assert_eq!(&pixels[..info.buffer_size()], c.pixels.as_slice());
    }

    #[test]
    fn canvases_from_rgb_buffers() {
        let c = Canvas::from_rgb(2, 1, vec![1, 2, 3, 4, 5, 6]).expect("2 x 1");
        assert_eq!(c.get(1, 0), Some([4, 5, 6]));
        assert!(Canvas::from_rgb(2, 2, vec![0; 6]).is_none());
        assert!(Canvas::from_rgb(usize::MAX, 2, Vec::new()).is_none());
    }

    #[test]
    fn empty_canvases_have_no_png() {
        let c = Canvas::new(0, 5, [0, 0, 0]);
        assert!(c.to_png().is_empty());
        let path = std::env::temp_dir().join(format!("empty-{}.png", std::process::id()));
        assert!(c.save_png(&path).is_err());
        assert!(!path.exists());
    }

    #[test]
    fn drawing_touches_the_right_pixels() {
        let mut c = Canvas::new(20, 10, [0, 0, 0]);
        c.set(-1, 3, [9, 9, 9]); // outside: ignored
        c.fill_rect(2, 2, 4, 4, [255, 0, 0]);
        assert_eq!(c.get(3, 3), Some([255, 0, 0]));
        assert_eq!(c.get(4, 4), Some([0, 0, 0]));
        c.text(10, 1, "|", 1, [0, 255, 0]);
        // '|' is a full column at x = 10 + 2.
        assert!((1..8).all(|y| c.get(12, y) == Some([0, 255, 0])));
        assert_eq!(Canvas::text_width("ab", 2), 22);
    }
}
