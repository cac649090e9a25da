//! `run`: `.npy` in and out against the reference, on every path, from f16 and bf16 inputs.

use super::*;

#[test]
fn run_matches_the_reference_and_writes_outputs() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("ok");
    let mut rng = Rng::new(31);
    let (q, k, v) = (
        rng.array(&[2, 4, 9, 16], 1.0),
        rng.array(&[2, 2, 13, 16], 1.0),
        rng.array(&[2, 2, 13, 8], 1.0),
    );
    let mask = rng.bool_array(&[9, 13], 0.7);
    let (qp, kp, vp) = (
        save(&dir, "q.npy", &q),
        save(&dir, "k.npy", &k),
        save(&dir, "v.npy", &v),
    );
    let mp = save_bool(&dir, "m.npy", &mask);
    let (op, lp, wp) = (dir.join("o.npy"), dir.join("l.npy"), dir.join("w.npy"));
    let out = ran(tool()
        .args([
            "run",
            "--q",
            &qp,
            "--k",
            &kp,
            "--v",
            &vp,
            "--mask",
            &mp,
            "--causal",
            "bottom-right",
            "--check",
        ])
        .args([
            "--out",
            &op.display().to_string(),
            "--lse",
            &lp.display().to_string(),
        ])
        .args(["--weights", &wp.display().to_string()]));
    let stdout = &out.stdout;
    assert!(out.success(), "stdout: {stdout}\nstderr: {}", out.stderr);
    assert!(
        stdout.contains("check out") && stdout.contains("ok"),
        "{stdout}"
    );
    let opts = AttentionOptions::default()
        .causal(Causal::BottomRight)
        .mask(Mask::Bool(mask.view()))
        .with_lse()
        .with_weights();
    let expected = reference::attention(&q, &k, &v, &opts).expect("reference");
    let NpyArray::F32(got) = npy::read(&op).expect("out file") else {
        panic!("dtype")
    };
    assert!(wgpu_attention::compare(&got.view(), &expected.out.view(), Tolerance::F32).passed());
    let NpyArray::F32(lse) = npy::read(&lp).expect("lse file") else {
        panic!("dtype")
    };
    assert_eq!(lse.shape(), &[2, 4, 9]);
    let NpyArray::F32(w) = npy::read(&wp).expect("weights file") else {
        panic!("dtype")
    };
    assert_eq!(w.shape(), &[2, 4, 9, 13]);
}

/// Every path the help names can be chosen with `run --path` and passes `--check` where the
/// adapter runs it (a refusal must say so); the tensor-core tier, emulated, runs on any
/// adapter with f16, and must.
#[test]
fn run_accepts_every_path() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("paths");
    let mut rng = Rng::new(33);
    let q = save(&dir, "q.npy", &rng.array(&[4, 3, 16], 1.0));
    let k = save(&dir, "k.npy", &rng.array(&[2, 40, 16], 1.0));
    let v = save(&dir, "v.npy", &rng.array(&[2, 40, 8], 1.0));
    for path in [
        "auto",
        "unfused",
        "fused",
        "fused-subgroup",
        "fused-portable",
        "fused-tiled",
        "fused-coop",
        "decode",
        "decode-workgroup",
    ] {
        let o = ran(tool().env("WGPU_ATTENTION_COOP", "emulate").args([
            "run",
            "--q",
            &q,
            "--k",
            &k,
            "--v",
            &v,
            "--causal",
            "bottom-right",
            "--check",
            "--path",
            path,
        ]));
        let stderr = &o.stderr;
        let unavailable = stderr.contains("cannot run this problem");
        assert!(o.success() || unavailable, "--path {path}: {stderr}");
        assert!(
            o.success() || path != "fused-coop",
            "--path {path}: {stderr}"
        );
        if o.success() {
            assert!(
                stderr.contains(&format!(
                    "path {}",
                    if path == "auto" || path == "fused" {
                        ""
                    } else {
                        path
                    }
                )),
                "{stderr}"
            );
        }
    }
}

/// `run --dtype bf16` rounds the inputs to bfloat16, passes --check (its default relative
/// tolerance is bf16's, 2^-7) and writes a float32 output holding bf16 values; values beyond
/// f16's range are fine.
#[test]
fn run_in_bf16() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("bf16");
    let mut rng = Rng::new(36);
    let q = save(&dir, "q.npy", &rng.array(&[2, 9, 16], 1.0));
    let k = save(&dir, "k.npy", &rng.array(&[2, 11, 16], 1.0));
    // Values of order 1e5, beyond f16's 65504.
    let v = save(&dir, "v.npy", &rng.array(&[2, 11, 8], 1e5));
    let out = dir.join("ob16.npy");
    let o = ran(tool()
        .args([
            "run", "--q", &q, "--k", &k, "--v", &v, "--dtype", "bf16", "--check",
        ])
        .args(["--out", &out.display().to_string()]));
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}{}", o.stderr);
    assert!(
        stdout.contains("check out") && stdout.contains(": ok"),
        "{stdout}"
    );
    let bytes = std::fs::read(&out).expect("output");
    let NpyArray::F32(read) = npy::parse("ob16.npy", &bytes).expect("parse") else {
        panic!("dtype")
    };
    assert_eq!(read.shape(), &[2, 9, 8]);
    assert!(read.iter().all(|&x| half::bf16::from_f32(x).to_f32() == x));
}

/// `run --dtype f16` writes a float16 output that passes --check; values beyond f16's range
/// are exit 2 naming the file.
#[test]
fn run_in_f16() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("f16");
    let mut rng = Rng::new(35);
    let q = save(&dir, "q.npy", &rng.array(&[2, 9, 16], 1.0));
    let k = save(&dir, "k.npy", &rng.array(&[2, 11, 16], 1.0));
    let v = save(&dir, "v.npy", &rng.array(&[2, 11, 8], 1.0));
    let out = dir.join("o16.npy");
    let o = ran(tool()
        .args([
            "run", "--q", &q, "--k", &k, "--v", &v, "--dtype", "f16", "--check",
        ])
        .args(["--out", &out.display().to_string()]));
    assert!(o.success(), "{}{}", o.stdout, o.stderr);
    let bytes = std::fs::read(&out).expect("output");
    assert!(String::from_utf8_lossy(&bytes[..80]).contains("'<f2'"));
    let NpyArray::F32(read) = npy::parse("o16.npy", &bytes).expect("parse f16") else {
        panic!("dtype")
    };
    assert_eq!(read.shape(), &[2, 9, 8]);
    let mut big = rng.array(&[2, 9, 16], 1.0);
    big[[0, 0, 0]] = 1e6;
    let big = save(&dir, "big.npy", &big);
    let o = ran(tool().args(["run", "--q", &big, "--k", &k, "--v", &v, "--dtype", "f16"]));
    o.usage_error("q beyond f16's range", &["big.npy"]);
}

/// `run --precision f16` on float32 inputs: where the cooperative-matrix tier runs (emulated
/// here), auto takes it, the output stays float32, and `--check` holds the output to the f16
/// rule and the LSE to the reference on the inputs rounded to f16. These scores cancel
/// (100.03 x 100.01 - 100.03 x 100.02, about -1) where f16 rounds both keys' values to 100,
/// so an LSE held to the reference on the float32 inputs would be off by about 1 / sqrt(2).
/// By default float32 inputs stay off the tier, and values beyond f16's range take an f32
/// path with the reason rather than failing.
#[test]
fn run_computes_in_f16_where_asked() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("precision");
    let mut rng = Rng::new(39);
    let q = ArrayD::from_shape_fn(vec![1, 2, 5, 2], |_| 100.03f32);
    let k = ArrayD::from_shape_fn(vec![1, 2, 1, 2], |i| [100.01f32, -100.02][i[3]]);
    let (qp, kp) = (save(&dir, "q.npy", &q), save(&dir, "k.npy", &k));
    let vp = save(&dir, "v.npy", &rng.array(&[1, 2, 1, 8], 1.0));
    let (out, lse) = (dir.join("o.npy"), dir.join("l.npy"));
    let o = ran(tool().env("WGPU_ATTENTION_COOP", "emulate").args([
        "run",
        "--q",
        &qp,
        "--k",
        &kp,
        "--v",
        &vp,
        "--precision",
        "f16",
        "--check",
        "--out",
        &out.display().to_string(),
        "--lse",
        &lse.display().to_string(),
    ]));
    let (stdout, stderr) = (&o.stdout, &o.stderr);
    assert!(o.success(), "{stdout}{stderr}");
    assert!(stderr.contains("path fused-coop"), "{stderr}");
    assert!(stdout.contains("fused-coop computes in f16"), "{stdout}");
    assert!(
        stdout.contains("check lse") && !stdout.contains("FAILED"),
        "{stdout}"
    );
    let bytes = std::fs::read(&out).expect("output");
    assert!(String::from_utf8_lossy(&bytes[..80]).contains("'<f4'"));
    let NpyArray::F32(got) = npy::parse("l.npy", &std::fs::read(&lse).expect("lse")).unwrap()
    else {
        panic!("dtype")
    };
    // Rounded to f16 the scores are 0: the LSE of one key is its score.
    assert!(got.iter().all(|&x| x.abs() < 1e-6), "{got:?}");

    // f32 by default: the tier is not taken.
    let o = ran(tool()
        .env("WGPU_ATTENTION_COOP", "emulate")
        .args(["run", "--q", &qp, "--k", &kp, "--v", &vp, "--check"]));
    assert!(o.success(), "{}{}", o.stdout, o.stderr);
    assert!(!o.stderr.contains("path fused-coop"), "{}", o.stderr);

    // Beyond f16's range: an f32 path, and why.
    let big = save(&dir, "big.npy", &rng.array(&[1, 2, 5, 2], 1e6));
    let o = ran(tool().env("WGPU_ATTENTION_COOP", "emulate").args([
        "run",
        "--q",
        &big,
        "--k",
        &kp,
        "--v",
        &vp,
        "--precision",
        "f16",
        "--check",
    ]));
    assert!(o.success(), "{}{}", o.stdout, o.stderr);
    assert!(!o.stderr.contains("path fused-coop"), "{}", o.stderr);
    assert!(o.stderr.contains("beyond f16's range"), "{}", o.stderr);
}

/// Where the tier's check does not end on the device (a kernel that never finishes on some
/// driver; stood in for by `WGPU_ATTENTION_COOP_CHECK_WAIT=0`, which gives the check's
/// wait no time), the context is taken for hung and `run` runs the call again on a new
/// device without the tier, saying why, with the reference's result, rather than hanging.
#[test]
fn run_runs_again_without_the_tier_where_its_check_hangs() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("hang");
    let mut rng = Rng::new(41);
    let qp = save(&dir, "q.npy", &rng.array(&[1, 2, 19, 16], 1.0));
    let kp = save(&dir, "k.npy", &rng.array(&[1, 2, 23, 16], 1.0));
    let vp = save(&dir, "v.npy", &rng.array(&[1, 2, 23, 8], 1.0));
    let args = [
        "run",
        "--q",
        &qp,
        "--k",
        &kp,
        "--v",
        &vp,
        "--precision",
        "f16",
    ];
    let o = ran(tool()
        .env("WGPU_ATTENTION_COOP", "emulate")
        .env("WGPU_ATTENTION_COOP_CHECK", "1")
        .env("WGPU_ATTENTION_COOP_CHECK_WAIT", "0")
        .args(args)
        .arg("--check"));
    let (stdout, stderr) = (&o.stdout, &o.stderr);
    assert!(o.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("had not finished the tensor-core tier's check of")
            && stderr.contains("running the call again on a new device without it"),
        "{stderr}"
    );
    assert!(!stderr.contains("path fused-coop"), "{stderr}");
    assert!(
        stdout.contains("check out") && !stdout.contains("FAILED"),
        "{stdout}"
    );
    // Without the switch the same call takes the tier, its check passed.
    let o = ran(tool()
        .env("WGPU_ATTENTION_COOP", "emulate")
        .env("WGPU_ATTENTION_COOP_CHECK", "1")
        .args(args));
    assert!(o.success(), "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("path fused-coop"), "{}", o.stderr);
}
