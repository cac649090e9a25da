//! `bench`: JSON lines and plots, masks, 16-bit inputs, decode beside the copy kernel, and
//! its refusals.

use super::*;

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

/// `bench --mask` gives every path the mask and checks it against the reference with the
/// same mask: each kind runs on three paths with the error of f32, and the JSON names it; a
/// path that takes no mask is skipped, and bench fails where it was the only one asked for.
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

    // The CPU baseline takes no mask. Alone, it is skipped with that reason and bench
    // fails (exit 2) rather than print an empty table; beside a path that runs, that
    // path's row stands and bench succeeds.
    let cpu_alone = [
        "bench",
        "--shape",
        "1,1,8,8,4",
        "--mask",
        "bias",
        "--reps",
        "1",
    ];
    let o = ran(tool().args(cpu_alone).args(["--path", "cpu-ndarray"]));
    o.usage_error(
        "cpu-ndarray alone with a mask",
        &["no path asked for ran", "cpu-ndarray"],
    );
    let skipped = "skipped: the CPU baseline takes no mask";
    assert!(o.stdout.contains(skipped), "{}", o.stdout);
    let o = ran(tool()
        .args(cpu_alone)
        .args(["--path", "cpu-ndarray,unfused", "--json"]));
    assert!(o.success(), "{}\n{}", o.stdout, o.stderr);
    let rows: Vec<&str> = o.stdout.lines().filter(|l| l.starts_with('{')).collect();
    assert_eq!(rows.len(), 1, "{}", o.stdout);
    assert!(rows[0].contains("\"path\": \"unfused\""), "{}", rows[0]);
    assert!(
        o.stderr.contains(&format!("cpu-ndarray: {skipped}")),
        "{}",
        o.stderr
    );
}

/// Bad bench options: exit 2 before any work, one line naming the option and saying what
/// was expected.
#[test]
fn bench_rejects_bad_options() {
    let cases: [(&[&str], &[&str]); 12] = [
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
        // One query head over two kv heads: the reference would broadcast it, no GPU path
        // takes it (before 2026-12-07 each path's row said so in turn).
        (
            &["--shape", "1,1,4,4,8", "--kv-heads", "2"],
            &[
                "--kv-heads 2",
                "query heads (1) must be a multiple of key/value heads (2)",
            ],
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

/// Where the tier's check does not end on the device (stood in for by
/// `WGPU_ATTENTION_COOP_CHECK_WAIT=0`, as in `run`'s test), `bench` says the device was
/// lost, runs the path that met it again on a new device without the tier (not reporting
/// it skipped), its row saying so, and the paths after it there too: auto's row and the
/// portable tier's, both checked.
#[test]
fn bench_runs_a_path_again_without_the_tier_where_its_check_hangs() {
    if common::ctx().is_none() {
        return;
    }
    let o = ran(tool()
        .env("WGPU_ATTENTION_COOP", "emulate")
        .env("WGPU_ATTENTION_COOP_CHECK", "1")
        .env("WGPU_ATTENTION_COOP_CHECK_WAIT", "0")
        .args([
            "bench",
            "--shape",
            "1,2,19,23,16",
            "--path",
            "auto,fused-portable",
            "--precision",
            "f16",
            "--reps",
            "1",
        ]));
    let stdout = &o.stdout;
    assert!(o.success(), "{stdout}\n{}", o.stderr);
    assert!(
        stdout.contains("the GPU device was lost (the device had not finished")
            && stdout.contains("this path and the paths after it run on a new device"),
        "{stdout}"
    );
    assert!(!stdout.contains("skipped"), "{stdout}");
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("first call"))
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(
        rows[0].contains("run again without the tier after a device loss"),
        "{}",
        rows[0]
    );
    assert!(!rows[1].contains("run again"), "{}", rows[1]);
    for row in rows {
        assert!(!row.starts_with("fused-coop"), "{row}");
        let err: f64 = row
            .split_whitespace()
            .nth(5)
            .and_then(|e| e.parse().ok())
            .unwrap_or_else(|| panic!("no error column in {row}"));
        assert!(err < 1e-4, "{row}");
    }
}
