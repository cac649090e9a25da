//! The command-line tool as a user runs it: `.npy` in, `.npy` out, exit codes, and no output
//! file on any error.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::Rng;
use ndarray::{ArrayD, IxDyn};
use wgpu_attention::npy::{self, NpyArray};
use wgpu_attention::{reference, AttentionOptions, Causal, Mask, Tolerance};

/// The path name that `--path decode` runs under on this adapter for the benches' decode
/// shape (B1 Hq4 Hkv2 Lq1 Lk300 D16), as the planner reports it: decode's invocation form
/// ("decode") on CPU adapters, its workgroup form ("decode-workgroup") on GPUs.
fn decode_path_name(ctx: &wgpu_attention::Context) -> &'static str {
    let opts = AttentionOptions::default().path(wgpu_attention::PathChoice::Decode);
    wgpu_attention::plan(
        ctx,
        &[1, 4, 1, 16],
        &[1, 2, 300, 16],
        &[1, 2, 300, 16],
        &opts,
    )
    .expect("decode plans")
    .path
}

fn tool() -> Command {
    // The tool's processes inherit lavapipe's compile flags from this one.
    common::unoptimised_cpu_driver();
    Command::new(env!("CARGO_BIN_EXE_wgpu-attention"))
}

/// What one run of the tool returned: its exit code, and its two streams as text.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// The one line of an error the tool reports as bad usage or input: exit 2, no panic,
    /// one error line on stderr, which mentions each of `mentions`. `what` names the run.
    fn usage_error(&self, what: &str, mentions: &[&str]) -> &str {
        let stderr = &self.stderr;
        assert_eq!(self.code, Some(2), "{what}: stderr {stderr}");
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        let lines = error_lines(stderr);
        assert_eq!(
            lines.len(),
            1,
            "{what}: one error line expected, got {stderr}"
        );
        for mention in mentions {
            assert!(
                lines[0].contains(mention),
                "{what}: '{}' should mention {mention}",
                lines[0]
            );
        }
        lines[0]
    }
}

/// `run --path decode-workgroup --check --causal bottom-right` on the files `[q, k, v]` in
/// `dtype`, with the environment variables `envs` (the decode layouts under test).
fn checked_decode_workgroup(envs: &[(&str, &str)], [q, k, v]: [&str; 3], dtype: &str) -> Ran {
    ran(tool()
        .envs(envs.iter().copied())
        .args(["run", "--q", q, "--k", k, "--v", v, "--dtype", dtype])
        .args([
            "--path",
            "decode-workgroup",
            "--check",
            "--causal",
            "bottom-right",
        ]))
}

/// Runs the tool as `cmd` sets it up (arguments, environment) and waits for it to end.
fn ran(cmd: &mut Command) -> Ran {
    let o = cmd.output().expect("run tool");
    Ran {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The test's own folder, removed when it ends.
fn tmpdir(name: &str) -> common::TempDir {
    common::TempDir::new(&format!("cli-{name}"))
}

fn save(dir: &Path, name: &str, a: &ArrayD<f32>) -> String {
    let p = dir.join(name);
    npy::write(&p, &a.view()).expect("write npy");
    p.display().to_string()
}

fn save_bool(dir: &Path, name: &str, a: &ArrayD<bool>) -> String {
    let p = dir.join(name);
    npy::write_bool(&p, &a.view()).expect("write npy");
    p.display().to_string()
}

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

/// A raw .npy file with the given header fields and payload.
fn raw_npy(
    dir: &Path,
    name: &str,
    descr: &str,
    fortran: &str,
    shape: &str,
    payload: &[u8],
) -> String {
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    bytes.extend_from_slice(payload);
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write");
    p.display().to_string()
}

/// The tool's error lines in `stderr` (each starts with its name).
fn error_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("wgpu-attention"))
        .collect()
}

/// Bad inputs: exit 2, one line on stderr naming the file, and no output file.
#[test]
fn bad_inputs_exit_2_and_write_nothing() {
    let dir = tmpdir("bad");
    let mut rng = Rng::new(32);
    let good = save(&dir, "good.npy", &rng.array(&[5, 4], 1.0));
    let other_len = save(&dir, "k6.npy", &rng.array(&[6, 3], 1.0));
    let mut nan = rng.array(&[5, 4], 1.0);
    nan[[1, 1]] = f32::NAN;
    let nan = save(&dir, "nan.npy", &nan);
    let garbage = dir.join("garbage.npy");
    std::fs::write(&garbage, b"definitely not numpy").expect("write");
    let garbage = garbage.display().to_string();
    let truncated = dir.join("truncated.npy");
    let full = std::fs::read(&good).expect("read");
    std::fs::write(&truncated, &full[..full.len() - 7]).expect("write");
    let truncated = truncated.display().to_string();
    let missing = dir.join("missing.npy").display().to_string();
    let bad_mask = save(&dir, "mask.npy", &rng.array(&[3, 7], 1.0));
    let ints = raw_npy(&dir, "ints.npy", "<i8", "False", "(5, 4)", &[0; 160]);
    let complex = raw_npy(&dir, "complex.npy", "<c8", "False", "(5, 4)", &[0; 160]);
    let big_endian = raw_npy(&dir, "bigendian.npy", ">f4", "False", "(5, 4)", &[0; 80]);
    let scalar = raw_npy(&dir, "scalar.npy", "<f4", "False", "()", &[0; 4]);
    let absurd = raw_npy(
        &dir,
        "absurd.npy",
        "<f4",
        "False",
        "(2097152, 2097152)",
        &[0; 64],
    );
    let mut inf = rng.array(&[5, 4], 1.0);
    inf[[4, 3]] = f32::INFINITY;
    let inf = save(&dir, "inf.npy", &inf);
    let out = dir.join("o.npy");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--q", &missing, "--k", &good, "--v", &good],
            "missing.npy",
        ),
        (
            vec!["--q", &garbage, "--k", &good, "--v", &good],
            "garbage.npy",
        ),
        (
            vec!["--q", &good, "--k", &truncated, "--v", &good],
            "truncated.npy",
        ),
        (vec!["--q", &nan, "--k", &good, "--v", &good], "nan.npy"),
        (
            vec!["--q", &good, "--k", &other_len, "--v", &good],
            "k6.npy",
        ),
        (
            vec![
                "--q", &good, "--k", &good, "--v", &good, "--mask", &bad_mask,
            ],
            "mask.npy",
        ),
        (vec!["--q", &ints, "--k", &good, "--v", &good], "ints.npy"),
        (
            vec!["--q", &good, "--k", &complex, "--v", &good],
            "complex.npy",
        ),
        (
            vec!["--q", &good, "--k", &good, "--v", &big_endian],
            "bigendian.npy",
        ),
        (
            vec!["--q", &scalar, "--k", &good, "--v", &good],
            "scalar.npy",
        ),
        (
            vec!["--q", &absurd, "--k", &good, "--v", &good],
            "absurd.npy",
        ),
        (vec!["--q", &good, "--k", &good, "--v", &inf], "inf.npy"),
        (
            vec!["--q", &good, "--k", &good, "--v", &good, "--scale", "inf"],
            "scale",
        ),
        (
            vec![
                "--q", &good, "--k", &good, "--v", &good, "--causal", "sideways",
            ],
            "--causal",
        ),
        (vec!["--q", &good, "--k", &good], "--v"),
        (
            vec!["--q", &good, "--k", &good, "--v", &good, "--bogus", "1"],
            "--bogus",
        ),
        (
            vec!["--q", &good, "--k", &good, "--v", &good, "--dtype", "f64"],
            "--dtype",
        ),
        (
            vec!["--q", &good, "--k", &good, "--v", &good, "--path=fastest"],
            "--path",
        ),
        (
            vec!["--q", &good, "--q", &good, "--k", &good, "--v", &good],
            "--q",
        ),
        (
            vec!["--q", &good, "--k", &good, "--v", &good, "--check=yes"],
            "--check",
        ),
        (
            vec!["--q", &good, "--k", &good, "--v", &good, "--atol", "x"],
            "--atol",
        ),
        (
            vec!["--q", &good, "--k", &good, "--v", &good, "--rtol", "-1"],
            "--rtol",
        ),
    ];
    for (args, mention) in cases {
        let o = ran(tool()
            .arg("run")
            .args(&args)
            .args(["--out", &out.display().to_string()]));
        o.usage_error(&format!("{args:?}"), &[mention]);
        assert!(!out.exists(), "{args:?}: no output file may be written");
    }
}

/// A misspelt switch of the library's (`WGPU_ATTENTION_…`, for testing and timing), in its
/// name or its value, is refused before any work (exit 2, one line naming the variable and
/// what it takes, no output file) rather than leaving the run on the default unnoticed.
#[test]
fn a_misspelt_switch_is_refused_before_any_work() {
    let dir = tmpdir("switches");
    let mut rng = Rng::new(53);
    let good = save(&dir, "good.npy", &rng.array(&[5, 4], 1.0));
    let out = dir.join("o.npy");
    for (name, value, mentions) in [
        (
            "WGPU_ATTENTION_COOP_VARIENT",
            "64x128",
            &["WGPU_ATTENTION_COOP_VARIENT", "WGPU_ATTENTION_COOP_VARIANT"][..],
        ),
        (
            "WGPU_ATTENTION_INVOCATION_ORDER",
            "reverse",
            &["'reverse'", "interleaved-reversed"][..],
        ),
        (
            "WGPU_ATTENTION_COOP_VARIANT",
            "64x96",
            &["'64x96'", "32x128k64"][..],
        ),
    ] {
        let o = ran(tool()
            .env(name, value)
            .args(["run", "--q", &good, "--k", &good, "--v", &good])
            .args(["--out", &out.display().to_string()]));
        o.usage_error(&format!("{name}={value}"), mentions);
        assert!(!out.exists(), "{name}: no output file may be written");
    }
}

/// An output file that could never be written (its directory is missing, or it names a
/// directory) is refused before any work: exit 2, one line naming the flag, no panic.
#[test]
fn output_paths_are_checked_before_any_work() {
    let dir = tmpdir("outpaths");
    let mut rng = Rng::new(33);
    let good = save(&dir, "good.npy", &rng.array(&[5, 4], 1.0));
    let missing_dir = dir.join("no-such-dir").join("o.npy").display().to_string();
    let a_dir = dir.display().to_string();
    let run = |flag: &str, path: &str| {
        vec![
            "run".to_string(),
            "--q".into(),
            good.clone(),
            "--k".into(),
            good.clone(),
            "--v".into(),
            good.clone(),
            format!("--{flag}"),
            path.to_string(),
        ]
    };
    let mut cases: Vec<(Vec<String>, &str, &str)> = Vec::new();
    for flag in ["out", "lse", "weights"] {
        cases.push((run(flag, &missing_dir), flag, "does not exist"));
        cases.push((run(flag, &a_dir), flag, "is a directory"));
    }
    let bench = |path: &str| {
        [
            "bench",
            "--shape",
            "1,1,4,4,4",
            "--reps",
            "1",
            "--plot",
            path,
        ]
        .map(String::from)
        .to_vec()
    };
    cases.push((bench(&missing_dir), "plot", "does not exist"));
    cases.push((bench(&a_dir), "plot", "is a directory"));
    cases.push((
        vec![
            "heatmap".into(),
            "--demo".into(),
            "--out".into(),
            missing_dir.clone(),
        ],
        "out",
        "does not exist",
    ));
    for (args, flag, why) in cases {
        let o = ran(tool().args(&args));
        o.usage_error(&format!("{args:?}"), &[&format!("--{flag}"), why]);
    }
}

#[test]
fn help_and_unknown_commands() {
    let o = ran(tool().arg("--help"));
    assert!(o.success());
    let stdout = &o.stdout;
    for said in [
        "wgpu-attention run",
        "EXIT CODES",
        "ENVIRONMENT",
        "WGPU_ADAPTER_NAME",
    ] {
        assert!(stdout.contains(said), "{said}: {stdout}");
    }
    for command in ["devices", "run", "bench", "heatmap", "soak", "completions"] {
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(command)),
            "{command}: {stdout}"
        );
    }
    // The internal command stays out of the help.
    assert!(!stdout.contains("self-check-rows"), "{stdout}");
    let o = ran(tool().arg("--version"));
    assert!(o.success());
    assert!(o.stdout.starts_with("wgpu-attention "));
    let o = ran(tool().arg("frobnicate"));
    o.usage_error("frobnicate", &["'frobnicate'"]);
    assert!(o.stdout.is_empty());
}

/// `completions SHELL` prints the shell's script (the subcommands and their options, not the
/// internal command); a shell it does not know is exit 2 with one line.
#[test]
fn completions_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = ran(tool().args(["completions", shell]));
        let stdout = &o.stdout;
        assert_eq!(o.code, Some(0), "{shell}: {}", o.stderr);
        // fish names options without their dashes (-l shape).
        for said in [
            "wgpu-attention",
            "bench",
            "heatmap",
            "shape",
            "causal",
            "kv-heads",
        ] {
            assert!(stdout.contains(said), "{shell}: {said} missing");
        }
        assert!(!stdout.contains("self-check-rows"), "{shell}");
    }
    let o = ran(tool().args(["completions", "bash"]));
    let script = &o.stdout;
    assert!(script.contains("complete -F"), "{script}");
    assert!(script.contains("top-left bottom-right"), "{script}");
    let o = ran(tool().args(["completions", "tcsh"]));
    o.usage_error("completions tcsh", &["'tcsh'", "bash"]);
    assert!(o.stdout.is_empty());
}

/// Every path the help names can be chosen with `run --path` and passes `--check`.
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
        "decode",
    ] {
        let o = ran(tool().args([
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

/// `bench --json` prints one object per path with the documented keys, and `--plot` writes
/// a PNG.
#[test]
fn bench_json_and_plot() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("bench");
    let png = dir.join("plot.png");
    let o = ran(tool()
        .args([
            "bench",
            "--shape",
            "1,2,256,256,16",
            "--path",
            "unfused",
            "--reps",
            "1",
            "--json",
        ])
        .args(["--plot", &png.display().to_string()]));
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}\n{}", o.stderr);
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    for key in [
        "\"path\": \"unfused\"",
        "\"ms\":",
        "\"gflops\":",
        "\"max_abs_err\":",
        "\"notes\": \"",
    ] {
        assert!(lines[0].contains(key), "{key} missing in {}", lines[0]);
    }
    let bytes = std::fs::read(&png).expect("plot written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    // A whole RGB picture, compressed (uncompressed it would be 1.9 MB).
    let (width, height) = png_size(&bytes);
    assert!(width >= 640 && height >= 400, "{width} x {height}");
    assert!(bytes.len() < 400_000, "{} bytes", bytes.len());
}

/// The size of a PNG, which must decode whole.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut pixels = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut pixels).expect("the pixels");
    (info.width, info.height)
}

/// `bench --mask` gives every path the mask and checks it against the reference with the
/// same mask: each kind runs on three paths with the error of f32, and the JSON names it.
#[test]
fn bench_with_masks() {
    if common::ctx().is_none() {
        return;
    }
    for kind in ["padding", "finfo-padding", "bool", "bias", "window"] {
        let o = ran(tool()
            .args(["bench", "--shape", "2,4,40,70,16", "--kv-heads", "2"])
            .args(["--path", "auto,unfused,decode", "--reps", "1", "--json"])
            .args(["--causal", "bottom-right", "--mask", kind]));
        let stdout = &o.stdout;
        let stderr = &o.stderr;
        assert!(o.success(), "{stdout}\n{stderr}");
        // With decode, a copy kernel's row follows as the bandwidth baseline.
        let lines: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with('{') && !l.contains("\"path\": \"copy\""))
            .collect();
        assert_eq!(lines.len(), 3, "{kind}: {stdout}\n{stderr}");
        for line in lines {
            assert!(line.contains(&format!("\"mask\": \"{kind}\"")), "{line}");
            let err: f64 = line
                .split("\"max_abs_err\": ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .and_then(|x| x.parse().ok())
                .expect("max_abs_err");
            assert!(err < 1e-4, "{kind}: {line}");
        }
    }
    let o = ran(tool().args(["bench", "--shape", "1,1,8,8,4", "--mask", "sometimes"]));
    let said = [
        "--mask",
        "'sometimes'",
        "possible values",
        "finfo-padding",
        "window",
    ];
    o.usage_error("--mask sometimes", &said);
    assert!(o.stdout.is_empty(), "nothing timed");
}

/// Bad bench options: exit 2 before any work, one line naming the option and saying what
/// was expected.
#[test]
fn bench_rejects_bad_options() {
    let cases: [(&[&str], &[&str]); 11] = [
        (
            &["--shape", "1,2,3"],
            &["--shape", "'1,2,3'", "B,H,Lq,Lk,D"],
        ),
        (&["--shape", "1,2,x,4"], &["--shape", "B,H,Lq,Lk,D"]),
        // Arrays too large for the device are refused before the host makes them (this
        // one overflowed ndarray's size and panicked).
        (
            &["--shape", "100000,100000,100000,100000,100000"],
            &["q (100000 x 100000 x 100000 x 100000) needs more than 2^64 bytes"],
        ),
        (
            &["--shape", "1,1,70000,70000,4", "--mask", "bias"],
            &["the mask (70000 x 70000) needs 19600000000 bytes in one buffer"],
        ),
        (&["--shape", "1,0,4,4,4"], &["--shape", "at least 1"]),
        (
            &["--shape", "1,8,4,4,8", "--kv-heads", "3"],
            &["multiple of"],
        ),
        (
            &["--shape", "1,1,4,4,4", "--reps", "0"],
            &["--reps", "at least 1"],
        ),
        (
            &["--shape", "1,1,4,4,4", "--reps", "-1"],
            &["--reps", "'-1'"],
        ),
        (
            &["--shape", "1,1,4,4,4", "--path", "fastest"],
            &[
                "--path",
                "'fastest'",
                "possible values",
                "all",
                "cpu-ndarray",
            ],
        ),
        (
            &["--shape", "1,1,4,4,4", "--path", "all,unfused"],
            &["--path all stands alone"],
        ),
        (
            &["--shape", "1,1,4,4,4", "--causal", "diagonal"],
            &[
                "--causal",
                "'diagonal'",
                "possible values: none, top-left, bottom-right",
            ],
        ),
    ];
    for (args, mentions) in cases {
        let o = ran(tool().arg("bench").args(args));
        o.usage_error(&format!("{args:?}"), mentions);
        assert!(o.stdout.is_empty(), "{args:?}: nothing timed");
    }
}

/// `bench --dtype f16` and `--dtype bf16` time each path on a 16-bit KvCache on the device
/// after checking it: decode says it read the format and the others that they widened; the
/// errors are those of 16-bit storage (well under 1e-2 at these sizes, and not NaN).
#[test]
fn bench_in_16_bits() {
    let Some(ctx) = common::ctx() else { return };
    let decode = decode_path_name(&ctx);
    for dtype in ["f16", "bf16"] {
        let o = ran(tool().args([
            "bench",
            "--shape",
            "1,4,1,300,16",
            "--kv-heads",
            "2",
            "--path",
            "decode,unfused",
            "--reps",
            "1",
            "--dtype",
            dtype,
        ]));
        let stdout = &o.stdout;
        assert!(o.success(), "{stdout}\n{}", o.stderr);
        let row = |name: &str| {
            stdout
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} row in {stdout}"))
                .to_string()
        };
        for (name, said) in [
            (format!("{decode} {dtype}"), format!("K/V read as {dtype}")),
            (
                format!("unfused {dtype}"),
                format!("K/V widened from {dtype} to f32 first"),
            ),
        ] {
            let line = row(&format!("{name} "));
            assert!(line.contains(&format!("{dtype} storage")), "{line}");
            assert!(line.contains("KvCache on the device"), "{line}");
            assert!(line.contains(&said), "{line}");
            let err: f64 = line
                .split_whitespace()
                .nth(6)
                .and_then(|e| e.parse().ok())
                .unwrap_or_else(|| panic!("no error column in {line}"));
            assert!(err < 1e-2, "{line}");
        }
    }
}

/// `bench` with the decode path times the copy kernel beside it and relates the two; the
/// decode row gives tokens/s.
#[test]
fn bench_decode_against_the_copy_kernel() {
    let Some(ctx) = common::ctx() else { return };
    let decode = decode_path_name(&ctx);
    let o = ran(tool().args([
        "bench",
        "--shape",
        "1,4,1,300,16",
        "--kv-heads",
        "2",
        "--path",
        "decode",
        "--reps",
        "1",
    ]));
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}\n{}", o.stderr);
    let row = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row in {stdout}"))
            .to_string()
    };
    assert!(
        row(&format!("{decode} ")).contains("tokens/s (1 query position a call)"),
        "{stdout}"
    );
    assert!(
        row("copy ").contains(&format!("{decode} read K/V at")),
        "{stdout}"
    );
}

/// `heatmap --demo` and `heatmap` on .npy files with labels write PNGs; bad input is exit 2.
#[test]
fn heatmap_demo_and_files() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("heatmap");
    let demo = dir.join("demo.png");
    let o = ran(tool().args(["heatmap", "--demo", "--out", &demo.display().to_string()]));
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}{}", o.stderr);
    assert!(stdout.contains("weight of \"I\" on \"not\""), "{stdout}");
    let bytes = std::fs::read(&demo).expect("demo png");
    assert!(bytes.starts_with(b"\x89PNG"));
    let (width, height) = png_size(&bytes);
    assert!(width > 600 && height > 300, "{width} x {height}");
    // Compressed: 19.5 kB on 2026-12-04, where the stored-blocks encoder wrote 2.7 MB.
    assert!(bytes.len() < 200_000, "{} bytes", bytes.len());
    let mut rng = Rng::new(34);
    let q = save(&dir, "q.npy", &rng.array(&[2, 5, 8], 1.0));
    let k = save(&dir, "k.npy", &rng.array(&[2, 5, 8], 1.0));
    let labels = dir.join("tokens.txt");
    std::fs::write(&labels, "the cat sat on mats").expect("labels");
    let png = dir.join("heads.png");
    let o = ran(tool()
        .args([
            "heatmap",
            "--q",
            &q,
            "--k",
            &k,
            "--labels",
            &labels.display().to_string(),
            "--causal",
            "top-left",
        ])
        .args(["--out", &png.display().to_string()]));
    assert!(o.success(), "{}", o.stderr);
    assert!(std::fs::read(&png).expect("png").starts_with(b"\x89PNG"));
    let o = ran(tool().args(["heatmap", "--q", "missing.npy", "--k", &k]));
    o.usage_error("heatmap of a missing file", &["missing.npy"]);
}

/// `heatmap` draws either the demo or the files: both, or neither, is exit 2 with one line
/// naming the options, and no picture.
#[test]
fn heatmap_takes_the_demo_or_files() {
    let dir = tmpdir("heatmap-args");
    let png = dir.join("h.png").display().to_string();
    let cases: [(&[&str], &[&str]); 3] = [
        (&["--demo", "--q", "q.npy"], &["--demo", "--q"]),
        (&[], &["--q", "--k"]),
        (&["--q", "q.npy"], &["--k"]),
    ];
    for (args, mentions) in cases {
        let o = ran(tool().arg("heatmap").args(args).args(["--out", &png]));
        o.usage_error(&format!("{args:?}"), mentions);
        assert!(!Path::new(&png).exists(), "{args:?}: no picture");
    }
}

/// A short soak: mixed calls, results sampled against the reference, memory reported.
/// The main job (no arguments): every path agrees with the reference, and the timing table
/// has its three rows (two prefill, one decode), each with a path and positive ms and
/// GFLOP/s. On CPUs with AVX-512 the prefill rows come from a second process at 512-bit
/// vectors (`self-check-rows`), which must print the same two rows.
#[test]
fn self_check_passes_and_times_three_rows() {
    if common::ctx().is_none() {
        return;
    }
    let o = ran(&mut tool());
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}{}", o.stderr);
    assert!(
        stdout.contains("All paths agree with the reference."),
        "{stdout}"
    );
    assert!(!stdout.contains("timing here instead"), "{stdout}");
    let timed = |text: &str| -> Vec<(String, f64, f64)> {
        text.lines()
            .filter(|l| l.trim_start().starts_with("B1 Hq"))
            .map(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                let n = cols.len();
                assert!(n >= 4, "{l}");
                let num = |s: &str| s.parse::<f64>().unwrap_or_else(|_| panic!("{l}"));
                (cols[n - 3].to_string(), num(cols[n - 2]), num(cols[n - 1]))
            })
            .collect()
    };
    let rows = timed(stdout);
    assert_eq!(rows.len(), 3, "{stdout}");
    for (path, ms, gflops) in &rows {
        assert!(!path.is_empty() && *ms > 0.0 && *gflops > 0.0, "{stdout}");
    }
    let o = ran(tool().arg("self-check-rows"));
    let rows_out = &o.stdout;
    assert!(o.success(), "{rows_out}");
    assert_eq!(timed(rows_out).len(), 2, "{rows_out}");
}

#[test]
fn soak_runs_and_reports_memory() {
    if common::ctx().is_none() {
        return;
    }
    let o = ran(tool().args(["soak", "--calls", "200"]));
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}{}", o.stderr);
    assert!(
        stdout.contains("soak: 200 calls") && stdout.contains("host RSS"),
        "{stdout}"
    );
    assert!(stdout.contains("live device buffers"), "{stdout}");
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

/// The self-check with the cooperative-matrix tier emulated (`WGPU_ATTENTION_COOP=emulate`):
/// its rows are held to the f16 rule and pass. It found fused-coop adding an output block
/// twice where the blocks did not divide among the subgroups (D 80).
#[test]
fn self_check_with_the_cooperative_matrix_tier_emulated() {
    if common::ctx().is_none() {
        return;
    }
    let o = ran(tool().env("WGPU_ATTENTION_COOP", "emulate"));
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}{}", o.stderr);
    let coop_rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("fused-coop"))
        .collect();
    assert_eq!(coop_rows.len(), 2, "{stdout}");
    assert!(coop_rows.iter().all(|l| l.contains("ok (f16")), "{stdout}");
}

/// The emulated tier with virtual subgroups of 16, 64 and 128 lanes
/// (`WGPU_ATTENTION_COOP_LANES`), as adapters with those subgroup sizes would run it (the
/// hardware path accepts 16 to 128): 8 subgroups a workgroup, or 2 or 1, each holding
/// several rows of score and output blocks; and blocks of 64 keys (the 32x128k64 variant,
/// forced with `WGPU_ATTENTION_COOP_VARIANT`: the only one of them that fits lavapipe's
/// 32 KiB) with 32 and 128 lanes, a forced variant that cannot run the problems here, and
/// the K/V prefetch (`WGPU_ATTENTION_COOP_PREFETCH=1`) on 32-key and 64-key blocks, and
/// output tiles of one row of blocks (`WGPU_ATTENTION_COOP_OUT_ROWS=1`, the layout before
/// 2026-12-06; the others run two rows where the blocks allow), and the weights in one f16
/// part (`WGPU_ATTENTION_COOP_SPLIT_P=0`; the others two, but 32x128k64, whose low parts
/// would not fit 32 KiB). Held to
/// the f16 rule by `run --check`, GQA, a bool mask, both causal alignments, Dv != D, large
/// logits (the accumulators' rescaling).
#[test]
fn coop_runs_with_other_subgroup_sizes() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("coop-lanes");
    let mut rng = Rng::new(37);
    let mut allow = rng.bool_array(&[1, 1, 77, 100], 0.7);
    allow.slice_mut(ndarray::s![0, 0, 5, ..]).fill(false);
    let cases = [
        (
            save(&dir, "q1.npy", &rng.array(&[1, 4, 77, 128], 4.0)),
            save(&dir, "k1.npy", &rng.array(&[1, 2, 100, 128], 4.0)),
            save(&dir, "v1.npy", &rng.array(&[1, 2, 100, 100], 1.0)),
            Some(save_bool(&dir, "m1.npy", &allow)),
            "bottom-right",
        ),
        (
            save(&dir, "q2.npy", &rng.array(&[2, 2, 70, 64], 4.0)),
            save(&dir, "k2.npy", &rng.array(&[2, 2, 90, 64], 4.0)),
            save(&dir, "v2.npy", &rng.array(&[2, 2, 90, 48], 1.0)),
            None,
            "top-left",
        ),
    ];
    // (lanes, the variant forced, the keys a block it runs, the K/V prefetch, the rows of
    // output blocks a subgroup's tile spans at most, the weights in two parts where they
    // fit): a variant that cannot run the problem here (64x64k64: D 128, and 37 780 bytes)
    // is not taken, and the reason says so.
    for (lanes, variant, keys, prefetch, out_rows, split) in [
        ("16", "", 32, "0", "2", "1"),
        ("64", "", 32, "0", "2", "1"),
        ("128", "", 32, "0", "2", "1"),
        ("32", "32x128k64", 64, "0", "2", "1"),
        ("128", "32x128k64", 64, "0", "2", "1"),
        ("32", "64x64k64", 32, "0", "2", "1"),
        ("32", "", 32, "1", "2", "1"),
        ("16", "32x128k64", 64, "1", "2", "1"),
        ("32", "", 32, "0", "1", "1"),
        ("16", "", 32, "0", "1", "1"),
        ("32", "", 32, "0", "2", "0"),
    ] {
        for (q, k, v, mask, causal) in &cases {
            let mut args = vec![
                "run",
                "--q",
                q,
                "--k",
                k,
                "--v",
                v,
                "--dtype",
                "f16",
                "--path",
                "fused-coop",
                "--check",
                "--causal",
                causal,
            ];
            if let Some(m) = mask {
                args.extend(["--mask", m.as_str()]);
            }
            let o = ran(tool()
                .env("WGPU_ATTENTION_COOP", "emulate")
                .env("WGPU_ATTENTION_COOP_LANES", lanes)
                .env("WGPU_ATTENTION_COOP_VARIANT", variant)
                .env("WGPU_ATTENTION_COOP_PREFETCH", prefetch)
                .env("WGPU_ATTENTION_COOP_OUT_ROWS", out_rows)
                .env("WGPU_ATTENTION_COOP_SPLIT_P", split)
                .args(&args));
            let (stdout, stderr) = (&o.stdout, &o.stderr);
            let what = format!(
                "{lanes} lanes, {variant} prefetch {prefetch} rows {out_rows} split {split}, {q}"
            );
            assert!(o.success(), "{what}: {stdout}{stderr}");
            assert!(stderr.contains("path fused-coop"), "{what}: {stderr}");
            assert!(
                stderr.contains(&format!("{keys} keys a block")),
                "{what}: {stderr}"
            );
            let not_taken = format!("WGPU_ATTENTION_COOP_VARIANT={variant} not taken");
            assert_eq!(
                stderr.contains(&not_taken),
                variant.starts_with("64x64"),
                "{what}: {stderr}"
            );
            assert_eq!(
                stderr.contains("K/V prefetched into registers"),
                prefetch == "1",
                "{what}: {stderr}"
            );
            assert_eq!(
                stderr.contains("the weights P multiplied into V as two f16 parts"),
                split == "1" && variant != "32x128k64",
                "{what}: {stderr}"
            );
            assert_eq!(
                stderr.contains("output blocks in one row a subgroup"),
                out_rows == "1",
                "{what}: {stderr}"
            );
            assert!(
                stdout.contains("fused-coop computes in f16"),
                "{what}: {stdout}"
            );
        }
    }
}

/// Every subcommand answers `--help` with its own part of the help (exit 0, nothing run),
/// and flags take `--name=value` as well as `--name value`.
#[test]
fn subcommands_have_help_and_take_name_equals_value() {
    for command in ["run", "bench", "heatmap", "devices", "soak", "completions"] {
        let o = ran(tool().args([command, "--help"]));
        let stdout = &o.stdout;
        assert_eq!(o.code, Some(0), "{command}: {stdout}");
        assert!(
            stdout.contains(&format!("wgpu-attention {command}")) && stdout.contains("EXIT CODES"),
            "{command}: {stdout}"
        );
    }
    if common::ctx().is_none() {
        return;
    }
    let o = ran(tool().args([
        "bench",
        "--shape=1,2,40,40,16",
        "--path=fused-portable",
        "--reps=1",
        "--json",
    ]));
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}{}", o.stderr);
    assert!(stdout.contains("\"path\": \"fused-portable\""), "{stdout}");
    let o = ran(tool().args(["bench", "--shape=1,2,40,40,16", "--json=yes"]));
    o.usage_error("--json=yes", &["--json", "'yes'"]);
    assert!(o.stdout.is_empty());
}

/// `run --dtype f16 --check` where fused-coop runs (emulated here) holds its output to the
/// f16 rule by default: at the plain tolerance (atol 1e-4, rtol 1e-3) this problem had 2 of
/// 1 024 outputs outside, within twice f16 attention's own error.
#[test]
fn run_check_holds_fused_coop_to_the_f16_rule() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("coop-check");
    let mut rng = Rng::new(36);
    let q = save(&dir, "q.npy", &rng.array(&[2, 16, 32], 1.0));
    let k = save(&dir, "k.npy", &rng.array(&[2, 24, 32], 1.0));
    let v = save(&dir, "v.npy", &rng.array(&[2, 24, 32], 1.0));
    let args = [
        "run",
        "--q",
        &q,
        "--k",
        &k,
        "--v",
        &v,
        "--dtype",
        "f16",
        "--check",
        "--causal",
        "bottom-right",
    ];
    let o = ran(tool().env("WGPU_ATTENTION_COOP", "emulate").args(args));
    let (stdout, stderr) = (&o.stdout, &o.stderr);
    assert!(o.success(), "{stdout}{stderr}");
    assert!(stderr.contains("path fused-coop"), "{stderr}");
    assert!(stdout.contains("fused-coop computes in f16"), "{stdout}");
}

/// Decode's workgroup form with its K and V loads in batches of 1 (the kernel before
/// 2026-12-06), 3 (so that a row of 16 vec4 of K and a full 64-key block of V end in a
/// tail), 8 (the GPUs' default) and 16 (the most, and the GPUs' default for 16-bit K/V), set by `WGPU_ATTENTION_DECODE_BATCH`, with K read a row
/// an invocation and staged through workgroup memory (`WGPU_ATTENTION_DECODE_STAGE`; staged
/// also at D 36, whose second chunk of 8 columns has one), and the output loop's 6
/// invocation sets (Dv 40) sharing out V's keys or the rows (`WGPU_ATTENTION_DECODE_V_KEYS`;
/// the 12 rows of a tile take two rounds of the sets' final sums): checked against the
/// reference by `run --check`, with blocks of 64 keys, a last block of 2 and GQA, f32 and
/// f16 K/V; the plan's reason says the batch, how K is read and how V's work is shared.
#[test]
fn decode_workgroup_loads_in_batches() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("decode-v-batch");
    let mut rng = Rng::new(41);
    let v = save(&dir, "v.npy", &rng.array(&[1, 2, 130, 40], 1.0));
    let mut qk = |d: usize| {
        let q = save(&dir, &format!("q{d}.npy"), &rng.array(&[1, 8, 3, d], 2.0));
        let k = save(&dir, &format!("k{d}.npy"), &rng.array(&[1, 2, 130, d], 1.0));
        (d, q, k)
    };
    let (d64, d36) = (qk(64), qk(36));
    // (batch, dtype, staged, V by keys, D)
    let runs = [
        ("1", "f32", "0", "0", &d64),
        ("16", "f32", "0", "0", &d64),
        ("3", "f32", "0", "1", &d64),
        ("8", "f32", "0", "1", &d64),
        ("3", "f16", "0", "0", &d64),
        ("8", "f32", "1", "1", &d64),
        ("3", "f16", "1", "1", &d64),
        ("8", "f32", "1", "0", &d36),
        ("1", "f16", "1", "1", &d36),
        ("16", "f16", "1", "1", &d64),
    ];
    for (batch, dtype, stage, v_keys, (d, q, k)) in runs {
        let o = checked_decode_workgroup(
            &[
                ("WGPU_ATTENTION_DECODE_BATCH", batch),
                ("WGPU_ATTENTION_DECODE_STAGE", stage),
                ("WGPU_ATTENTION_DECODE_V_KEYS", v_keys),
            ],
            [q, k, &v],
            dtype,
        );
        let (stdout, stderr) = (&o.stdout, &o.stderr);
        let what =
            format!("batches of {batch}, {dtype}, staged {stage}, V by keys {v_keys}, D {d}");
        assert!(o.success(), "{what}: {stdout}{stderr}");
        assert!(stderr.contains("path decode-workgroup"), "{what}: {stderr}");
        assert!(
            stderr.contains(&format!("loads in batches of {batch}")),
            "{what}: {stderr}"
        );
        let k_read = match stage {
            "1" => "K staged through workgroup memory",
            _ => "K read a row an invocation",
        };
        assert!(stderr.contains(k_read), "{what}: {stderr}");
        let v_shared = match v_keys {
            "1" => "6 invocation sets sharing out V's keys",
            _ => "6 invocation sets sharing out the rows",
        };
        assert!(stderr.contains(v_shared), "{what}: {stderr}");
    }
}

/// The merge of decode's key splits with 1, 2 and 16 invocations sharing each output's
/// splits (`WGPU_ATTENTION_MERGE_LANES`; GPUs take a lane for every 4 splits, CPU adapters
/// one), on both forms: output and LSE against the reference by `run --check --lse`, with
/// GQA, a row with no allowed key (zeros, LSE -inf: every split and lane empty) and a row
/// that sees only the last 50 of 700 keys (most splits, and at 16 lanes most lanes, empty);
/// the plan's reason says the lanes where there are several.
#[test]
fn merge_lanes_share_the_splits() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("merge-lanes");
    let mut rng = Rng::new(47);
    let q = save(&dir, "q.npy", &rng.array(&[1, 4, 2, 32], 2.0));
    let k = save(&dir, "k.npy", &rng.array(&[1, 2, 700, 32], 1.0));
    let v = save(&dir, "v.npy", &rng.array(&[1, 2, 700, 24], 1.0));
    let allowed = ArrayD::from_shape_fn(IxDyn(&[2, 700]), |ix| ix[0] == 1 && ix[1] >= 650);
    let mask = save_bool(&dir, "m.npy", &allowed);
    let lse = dir.join("lse.npy").display().to_string();
    for lanes in ["1", "2", "16"] {
        for path in ["decode", "decode-workgroup"] {
            let o = ran(tool()
                .env("WGPU_ATTENTION_MERGE_LANES", lanes)
                .args(["run", "--q", &q, "--k", &k, "--v", &v, "--mask", &mask])
                .args(["--lse", &lse, "--path", path, "--check"]));
            let (stdout, stderr) = (&o.stdout, &o.stderr);
            let what = format!("{lanes} lanes, {path}");
            assert!(o.success(), "{what}: {stdout}{stderr}");
            assert!(stderr.contains("key splits of"), "{what}: {stderr}");
            assert!(!stderr.contains(" 1 key splits"), "{what}: {stderr}");
            let said = format!("merged ({lanes} lanes an output)");
            assert_eq!(stderr.contains(&said), lanes != "1", "{what}: {stderr}");
            for part in ["out", "lse"] {
                assert!(
                    stdout.contains(&format!("check {part}: ")),
                    "{what}: {stdout}"
                );
            }
        }
    }
}

/// On llvmpipe planned as the CPU adapter it is, decode's workgroup form with K staged
/// (`WGPU_ATTENTION_DECODE_STAGE=1`, the GPUs' default, which CPU adapters do not take) at
/// the most keys one split may take and one 64-key block past it, at D 64 with 16 rows a
/// tile, where the staged loops leave the bound the least room
/// (wgpu_attention::loops::decode_workgroup_block: 219 iterations a block against 222).
/// As tests/suite/loops.rs does for the default form, with as many kv heads as give every
/// thread two workgroups, so that one split is the whole key row.
#[test]
fn decode_workgroup_stages_k_up_to_the_loop_limit() {
    use wgpu_attention::decode::CPU_WORKGROUPS_PER_THREAD;
    use wgpu_attention::loops::{self, decode_workgroup_block, LLVMPIPE_LOOP_LIMIT, SLACK};
    let Some(ctx) = common::ctx() else { return };
    let info = ctx.adapter_info();
    if !loops::limited(info) || info.device_type != wgpu::DeviceType::Cpu {
        eprintln!("not llvmpipe planned as a CPU adapter: no split at the loop limit");
        return;
    }
    let heads = wgpu_attention::fused::cpu_adapter_threads() * CPU_WORKGROUPS_PER_THREAD;
    let per_block = decode_workgroup_block(64 / 4, 64 / 4, true);
    let cap = ((LLVMPIPE_LOOP_LIMIT - SLACK) / per_block) as usize * 64;
    let dir = tmpdir("decode-staged-limit");
    let mut rng = Rng::new(43);
    let q = save(&dir, "q.npy", &rng.array(&[1, heads, 16, 64], 1.0));
    for (lk, splits) in [(cap, 1), (cap + 64, 2)] {
        let k = save(&dir, "k.npy", &rng.array(&[1, heads, lk, 64], 1.0));
        let v = save(&dir, "v.npy", &rng.array(&[1, heads, lk, 64], 1.0));
        // f16 K is staged packed, 16 columns a chunk (src/decode/kstage_packed.wgsl).
        for dtype in ["f32", "f16"] {
            let o = checked_decode_workgroup(
                &[("WGPU_ATTENTION_DECODE_STAGE", "1")],
                [&q, &k, &v],
                dtype,
            );
            check_staged_run(&o, &format!("Lk {lk}, {dtype}"), splits, cap);
        }
    }
}

/// A staged run of `decode_workgroup_stages_k_up_to_the_loop_limit`: passed its check, in
/// `splits` splits of `cap` keys, with K staged.
fn check_staged_run(o: &Ran, what: &str, splits: usize, cap: usize) {
    let (stdout, stderr) = (&o.stdout, &o.stderr);
    assert!(o.success(), "{what}: {stdout}{stderr}");
    let text = format!("{splits} key splits of {cap} keys");
    assert!(stderr.contains(&text), "{what}: {text}: {stderr}");
    assert!(
        stderr.contains("K staged through workgroup memory"),
        "{what}: {stderr}"
    );
}
