//! Reading and writing `.npy` files as numpy and PyTorch (`np.save(t.numpy())`) write them.
//!
//! Read: little-endian float32 (`<f4`), float16 (`<f2`, exact in f32), float64 (`<f8`,
//! converted to f32; values beyond the f32 range are an error), and bool (`|b1`), C or Fortran order,
//! format versions 1, 2 and 3. Everything
//! else is refused with a message that names the problem and what was expected; the size the
//! header claims is checked against the file before anything is allocated.
//! Write: float32, float16 and bool, C order, version 1.0.

use std::path::Path;

use ndarray::{ArrayD, ArrayViewD, IxDyn, ShapeBuilder};

use crate::error::{Error, Result};

const MAGIC: &[u8] = b"\x93NUMPY";

/// An array read from a `.npy` file.
#[derive(Clone, Debug, PartialEq)]
pub enum NpyArray {
    /// float32 data (float64 files are converted).
    F32(ArrayD<f32>),
    /// bool data.
    Bool(ArrayD<bool>),
}

impl NpyArray {
    /// Shape of the array.
    pub fn shape(&self) -> &[usize] {
        match self {
            NpyArray::F32(a) => a.shape(),
            NpyArray::Bool(a) => a.shape(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Dtype {
    F16,
    F32,
    F64,
    Bool,
}

impl Dtype {
    fn size(self) -> usize {
        match self {
            Dtype::F16 => 2,
            Dtype::F32 => 4,
            Dtype::F64 => 8,
            Dtype::Bool => 1,
        }
    }
}

fn fail(path: &str, reason: impl Into<String>) -> Error {
    Error::Npy {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// Reads a `.npy` file.
pub fn read(path: impl AsRef<Path>) -> Result<NpyArray> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| fail(&name, format!("cannot read file: {e}")))?;
    parse(&name, &bytes)
}

/// Parses the bytes of a `.npy` file; `name` is used in error messages.
pub fn parse(name: &str, bytes: &[u8]) -> Result<NpyArray> {
    if bytes.len() < 10 || !bytes.starts_with(MAGIC) {
        return Err(fail(name, "not a .npy file (missing the \\x93NUMPY magic)"));
    }
    // Untrusted bytes: every access is checked.
    let truncated = || fail(name, "truncated header");
    let major = *bytes.get(6).ok_or_else(truncated)?;
    let (header_len, header_start): (usize, usize) = match major {
        1 => {
            let n: [u8; 2] = bytes
                .get(8..10)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(truncated)?;
            (usize::from(u16::from_le_bytes(n)), 10)
        }
        2 | 3 => {
            let n: [u8; 4] = bytes
                .get(8..12)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(truncated)?;
            (u32::from_le_bytes(n) as usize, 12)
        }
        v => {
            return Err(fail(
                name,
                format!("unsupported .npy format version {v}; expected 1, 2 or 3"),
            ))
        }
    };
    let data_start = header_start
        .checked_add(header_len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| fail(name, "truncated header"))?;
    let header = std::str::from_utf8(bytes.get(header_start..data_start).ok_or_else(truncated)?)
        .map_err(|_| fail(name, "header is not valid text"))?;
    let (dtype, shape, fortran) = parse_header(name, header)?;
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n.checked_mul(dtype.size()).is_some())
        .ok_or_else(|| fail(name, format!("shape {shape:?} is absurdly large")))?;
    let data = bytes.get(data_start..).unwrap_or(&[]);
    let need = count * dtype.size();
    if data.len() < need {
        return Err(fail(
            name,
            format!(
                "truncated: shape {shape:?} needs {need} bytes of data, the file has {}",
                data.len()
            ),
        ));
    }
    if data.len() > need {
        return Err(fail(
            name,
            format!(
                "corrupt: {} unexpected bytes after the data of shape {shape:?}",
                data.len() - need
            ),
        ));
    }
    let dim = IxDyn(&shape).set_f(fortran);
    match dtype {
        Dtype::F16 => {
            // Every f16 value is exactly an f32.
            let v: Vec<f32> = data
                .chunks_exact(2)
                .filter_map(|c| <[u8; 2]>::try_from(c).ok())
                .map(|c| half::f16::from_le_bytes(c).to_f32())
                .collect();
            let a = row_major(name, &dim, v)?;
            Ok(NpyArray::F32(a))
        }
        Dtype::F32 => {
            let v: Vec<f32> = data
                .chunks_exact(4)
                .filter_map(|c| <[u8; 4]>::try_from(c).ok().map(f32::from_le_bytes))
                .collect();
            let a = row_major(name, &dim, v)?;
            Ok(NpyArray::F32(a))
        }
        Dtype::F64 => {
            let mut v = Vec::with_capacity(count);
            for (i, c) in data.chunks_exact(8).enumerate() {
                let Ok(c) = <[u8; 8]>::try_from(c) else {
                    continue;
                };
                let x = f64::from_le_bytes(c);
                let y = x as f32;
                if x.is_finite() && !y.is_finite() {
                    return Err(fail(
                        name,
                        format!("value {x} at flat index {i} is outside the f32 range"),
                    ));
                }
                v.push(y);
            }
            let a = row_major(name, &dim, v)?;
            Ok(NpyArray::F32(a))
        }
        Dtype::Bool => {
            let mut v = Vec::with_capacity(count);
            for (i, &b) in data.iter().enumerate() {
                match b {
                    0 => v.push(false),
                    1 => v.push(true),
                    _ => {
                        return Err(fail(
                            name,
                            format!("corrupt bool data: byte {b} at flat index {i}"),
                        ))
                    }
                }
            }
            let a = row_major(name, &dim, v)?;
            Ok(NpyArray::Bool(a))
        }
    }
}

/// The file's values as a row-major array. Fortran-order files (numpy writes them for
/// F-contiguous arrays, e.g. a transposed 2-D tensor) are read in that order and copied to
/// row-major, which the rest of the crate assumes.
fn row_major<T: Clone>(name: &str, dim: &ndarray::Shape<IxDyn>, v: Vec<T>) -> Result<ArrayD<T>> {
    Ok(ArrayD::from_shape_vec(dim.clone(), v)
        .map_err(|e| fail(name, e.to_string()))?
        .as_standard_layout()
        .into_owned())
}

/// Pulls `'key': value` out of the header dict; value ends at the next top-level comma.
fn dict_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let pat_single = format!("'{key}'");
    let pat_double = format!("\"{key}\"");
    let at = header
        .find(&pat_single)
        .or_else(|| header.find(&pat_double))?;
    let rest = header[at + pat_single.len()..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let mut depth = 0i32;
    for (i, ch) in rest.char_indices() {
        match ch {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth < 0 {
                    return Some(rest[..i].trim());
                }
            }
            ',' | '}' if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
    }
    None
}

/// The header's dtype, shape, and whether the data is in Fortran (column-major) order.
fn parse_header(name: &str, header: &str) -> Result<(Dtype, Vec<usize>, bool)> {
    let h = header.trim();
    if !h.starts_with('{') {
        return Err(fail(name, "corrupt header: expected a Python dict literal"));
    }
    let descr = dict_value(h, "descr").ok_or_else(|| fail(name, "corrupt header: no 'descr'"))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let dtype = match descr {
        "<f2" => Dtype::F16,
        "<f4" => Dtype::F32,
        "<f8" => Dtype::F64,
        "|b1" | "<b1" | "b1" | "?" | "|?" => Dtype::Bool,
        ">f4" | ">f8" | ">f2" => {
            return Err(fail(
                name,
                format!(
                "big-endian dtype '{descr}' is not supported; save little-endian float32 ('<f4')"
            ),
            ))
        }
        other => {
            let kind = match other
                .trim_start_matches(['<', '>', '|', '='])
                .chars()
                .next()
            {
                Some('i') | Some('u') => "integer",
                Some('c') => "complex",
                Some('U') | Some('S') => "string",
                Some('O') => "object",
                _ => "unsupported",
            };
            return Err(fail(
                name,
                format!("{kind} dtype '{other}' is not supported; expected float32 ('<f4'), float64 ('<f8'), float16 ('<f2'), or bool ('|b1') for masks"),
            ));
        }
    };
    let fortran = dict_value(h, "fortran_order")
        .ok_or_else(|| fail(name, "corrupt header: no 'fortran_order'"))?;
    let fortran = match fortran {
        "False" => false,
        "True" => true,
        other => {
            return Err(fail(
                name,
                format!("corrupt header: fortran_order is '{other}'"),
            ))
        }
    };
    let shape_text =
        dict_value(h, "shape").ok_or_else(|| fail(name, "corrupt header: no 'shape'"))?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| {
            fail(
                name,
                format!("corrupt header: shape '{shape_text}' is not a tuple"),
            )
        })?;
    let mut shape = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let n: usize = part.trim_end_matches('L').parse().map_err(|_| {
            fail(
                name,
                format!("corrupt header: bad dimension '{part}' in shape"),
            )
        })?;
        shape.push(n);
    }
    Ok((dtype, shape, fortran))
}

fn encode(
    shape: &[usize],
    descr: &str,
    payload_len: usize,
    payload: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so that the data starts on a 64-byte boundary; the header ends with '\n'.
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + payload_len);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    payload(&mut out);
    out
}

/// Encodes a float32 array as `.npy` bytes (version 1.0, C order).
pub fn to_bytes(a: &ArrayViewD<'_, f32>) -> Vec<u8> {
    encode(a.shape(), "<f4", a.len() * 4, |out| {
        for &x in a.iter() {
            out.extend_from_slice(&x.to_le_bytes());
        }
    })
}

/// Encodes an f16 array as `.npy` bytes (version 1.0, C order, `<f2`).
pub fn f16_to_bytes(a: &ArrayViewD<'_, half::f16>) -> Vec<u8> {
    encode(a.shape(), "<f2", a.len() * 2, |out| {
        for x in a.iter() {
            out.extend_from_slice(&x.to_le_bytes());
        }
    })
}

/// Writes an f16 array to a `.npy` file.
pub fn write_f16(path: impl AsRef<Path>, a: &ArrayViewD<'_, half::f16>) -> Result<()> {
    write_bytes(path.as_ref(), &f16_to_bytes(a))
}

/// Encodes a bool array as `.npy` bytes (version 1.0, C order), e.g. for masks.
pub fn bool_to_bytes(a: &ArrayViewD<'_, bool>) -> Vec<u8> {
    encode(a.shape(), "|b1", a.len(), |out| {
        out.extend(a.iter().map(|&b| u8::from(b)))
    })
}

/// Writes a float32 array to a `.npy` file.
pub fn write(path: impl AsRef<Path>, a: &ArrayViewD<'_, f32>) -> Result<()> {
    write_bytes(path.as_ref(), &to_bytes(a))
}

/// Writes a bool array to a `.npy` file.
pub fn write_bool(path: impl AsRef<Path>, a: &ArrayViewD<'_, bool>) -> Result<()> {
    write_bytes(path.as_ref(), &bool_to_bytes(a))
}

fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes)
        .map_err(|e| fail(&path.display().to_string(), format!("cannot write: {e}")))
}
