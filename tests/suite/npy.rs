//! `.npy` reading and writing, including the files numpy writes and the ones it should refuse.

use ndarray::{ArrayD, IxDyn};
use wgpu_attention::npy::{self, NpyArray};
use wgpu_attention::Error;

fn header(descr: &str, fortran: &str, shape: &str) -> Vec<u8> {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out
}

fn reason(bytes: &[u8]) -> String {
    match npy::parse("x.npy", bytes) {
        Err(Error::Npy { path, reason }) => {
            assert_eq!(path, "x.npy");
            reason
        }
        other => panic!("expected an npy error, got {other:?}"),
    }
}

#[test]
fn roundtrip_f32() {
    let a = ArrayD::from_shape_fn(IxDyn(&[2, 3, 4]), |i| {
        (i[0] * 12 + i[1] * 4 + i[2]) as f32 - 5.5
    });
    let bytes = npy::to_bytes(&a.view());
    assert_eq!(npy::parse("a", &bytes).unwrap(), NpyArray::F32(a));
    let one = ArrayD::from_elem(IxDyn(&[3]), 1.0f32);
    assert_eq!(
        npy::parse("b", &npy::to_bytes(&one.view())).unwrap(),
        NpyArray::F32(one)
    );
}

#[test]
fn reads_fortran_order_into_row_major() {
    // numpy writes F-contiguous arrays (a transposed 2-D tensor, say) column by column with
    // fortran_order True; element [i, j] of a (2, 3) array is then at flat index i + 2 j.
    let mut f = header("<f4", "True", "(2, 3)");
    for x in [0.0f32, 10.0, 1.0, 11.0, 2.0, 12.0] {
        f.extend_from_slice(&x.to_le_bytes());
    }
    let want =
        ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![0.0f32, 1.0, 2.0, 10.0, 11.0, 12.0]).unwrap();
    match npy::parse("f", &f).unwrap() {
        NpyArray::F32(a) => {
            assert_eq!(a, want);
            assert!(a.is_standard_layout());
        }
        other => panic!("expected f32, got {other:?}"),
    }
    let mut b = header("|b1", "True", "(2, 2)");
    b.extend_from_slice(&[1, 0, 0, 1]);
    let want = ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![true, false, false, true]).unwrap();
    assert_eq!(npy::parse("b", &b).unwrap(), NpyArray::Bool(want));
    let mut asym = header("|b1", "True", "(1, 3)");
    asym.extend_from_slice(&[1, 1, 0]);
    let want = ArrayD::from_shape_vec(IxDyn(&[1, 3]), vec![true, true, false]).unwrap();
    assert_eq!(npy::parse("b", &asym).unwrap(), NpyArray::Bool(want));
}

#[test]
fn reads_f64_and_bool() {
    let mut f = header("<f8", "False", "(2,)");
    f.extend_from_slice(&1.5f64.to_le_bytes());
    f.extend_from_slice(&(-2.0f64).to_le_bytes());
    assert_eq!(
        npy::parse("f", &f).unwrap(),
        NpyArray::F32(ArrayD::from_shape_vec(IxDyn(&[2]), vec![1.5, -2.0]).unwrap())
    );
    let mut b = header("|b1", "False", "(1, 3)");
    b.extend_from_slice(&[1, 0, 1]);
    assert_eq!(
        npy::parse("b", &b).unwrap(),
        NpyArray::Bool(ArrayD::from_shape_vec(IxDyn(&[1, 3]), vec![true, false, true]).unwrap())
    );
}

#[test]
fn refuses_bad_files_with_reasons() {
    assert!(reason(b"hello world, not numpy").contains("not a .npy"));
    let mut t = header("<f4", "False", "(4,)");
    t.extend_from_slice(&[0; 8]);
    assert!(reason(&t).contains("truncated"));
    let mut long = header("<f4", "False", "(1,)");
    long.extend_from_slice(&[0; 12]);
    assert!(reason(&long).contains("unexpected bytes"));
    assert!(reason(&header("<i8", "False", "(1,)")).contains("integer"));
    assert!(reason(&header("<c8", "False", "(1,)")).contains("complex"));
    assert!(reason(&header(">f4", "False", "(1,)")).contains("big-endian"));
    assert!(reason(&header("<f4", "False", "(4294967296, 4294967296, 16)")).contains("absurd"));
    assert!(reason(&header("<f4", "False", "(2, x)")).contains("bad dimension"));
    let mut huge = header("<f8", "False", "(1,)");
    huge.extend_from_slice(&1e300f64.to_le_bytes());
    assert!(reason(&huge).contains("f32 range"));
    let mut bad_bool = header("|b1", "False", "(1,)");
    bad_bool.push(7);
    assert!(reason(&bad_bool).contains("corrupt bool"));
    let cut = header("<f4", "False", "(1,)");
    assert!(reason(&cut[..20]).contains("truncated header"));
}
