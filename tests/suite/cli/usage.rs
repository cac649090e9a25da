//! Bad input and usage: exit 2, one line naming the problem and no output file; help,
//! completions and `--name=value`.

use super::*;

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
            vec![
                "--q", &good, "--k", &good, "--v", &good, "--check", "--atol", "x",
            ],
            "--atol",
        ),
        (
            vec![
                "--q", &good, "--k", &good, "--v", &good, "--check", "--rtol", "-1",
            ],
            "--rtol",
        ),
        // A tolerance without --check would be silently unused.
        (
            vec!["--q", &good, "--k", &good, "--v", &good, "--atol", "1e-3"],
            "--check",
        ),
        (
            vec![
                "--q",
                &good,
                "--k",
                &good,
                "--v",
                &good,
                "--precision",
                "f8",
            ],
            "--precision",
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
    // Finite float32 values that the 16-bit format asked for cannot hold: 70000 in f16, and
    // 3.4e38, which rounds to infinity in bfloat16 (its largest value is 3.3895e38).
    for (value, dtype, range) in [
        (7e4f32, "f16", "f16's range"),
        (3.4e38, "bf16", "bfloat16's range"),
    ] {
        let mut big = rng.array(&[5, 4], 1.0);
        big[[2, 1]] = value;
        let big = save(&dir, &format!("big_{dtype}.npy"), &big);
        let args = ["--q", &good, "--k", &good, "--v", &big, "--dtype", dtype];
        let o = ran(tool()
            .arg("run")
            .args(args)
            .args(["--out", &out.display().to_string()]));
        o.usage_error(
            &format!("{args:?}"),
            &[&format!("big_{dtype}.npy"), range, "[2, 1]"],
        );
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

/// A write that fails after the work (here `--lse` into /proc, which takes no files; a full
/// disk or permissions elsewhere) leaves no output file behind, not even the ones written
/// before it: each goes to a temporary name first, renamed once all are written (before
/// 2026-12-07's ninth session `--out` stayed on disk).
#[cfg(target_os = "linux")]
#[test]
fn a_failed_write_leaves_no_output_file() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("failed-write");
    let mut rng = Rng::new(33);
    let q = save(&dir, "q.npy", &rng.array(&[1, 2, 9, 8], 1.0));
    let out = dir.join("o.npy");
    let args = [
        "run",
        "--q",
        &q,
        "--k",
        &q,
        "--v",
        &q,
        "--out",
        &out.display().to_string(),
        "--lse",
        "/proc/lse.npy",
    ];
    let o = ran(tool().args(args));
    assert_ne!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let lines = error_lines(&o.stderr);
    assert_eq!(lines.len(), 1, "{}", o.stderr);
    assert!(lines[0].contains("/proc/lse.npy"), "{}", lines[0]);
    assert!(!out.exists(), "--out was left behind");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "q.npy")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
