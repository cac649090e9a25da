//! The other commands: heatmaps, the self-check (also with the tensor-core tier emulated),
//! soak and devices.

use super::*;
use wgpu_attention::CoopSupport;

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
    assert!(
        !o.stderr.contains("note:"),
        "labels that match: {}",
        o.stderr
    );
    assert!(std::fs::read(&png).expect("png").starts_with(b"\x89PNG"));
    // Labels of another length are drawn as indices, and stderr says so (rows and keys).
    let short = dir.join("short.txt");
    std::fs::write(&short, "the cat").expect("labels");
    let o = ran(tool()
        .args(["heatmap", "--q", &q, "--k", &k, "--labels"])
        .arg(short.display().to_string())
        .args(["--out", &png.display().to_string()]));
    assert!(o.success(), "{}", o.stderr);
    for what in ["query rows", "keys"] {
        let note = format!("--labels has 2 tokens for 5 {what}: the {what} are numbered instead");
        assert!(o.stderr.contains(&note), "{note}: {}", o.stderr);
    }
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

/// The main job (no arguments): every path agrees with the reference, and the timing table
/// has its three rows (two prefill, one decode), each with a path and positive ms and
/// GFLOP/s; where the tensor-core tier runs on the hardware, two more, the prefill rows with
/// f16 compute on fused-coop. On CPUs with AVX-512 the prefill rows come from a second
/// process at 512-bit vectors (`self-check-rows`), which must print two timed rows.
#[test]
fn self_check_passes_and_times_three_rows() {
    let Some(ctx) = common::ctx() else {
        return;
    };
    let f16_rows = matches!(ctx.coop(), CoopSupport::Hardware { .. })
        && !matches!(ctx.check_coop(), CoopSupport::Unavailable(_));
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
    assert_eq!(rows.len(), if f16_rows { 5 } else { 3 }, "{stdout}");
    for (path, ms, gflops) in &rows {
        assert!(!path.is_empty() && *ms > 0.0 && *gflops > 0.0, "{stdout}");
    }
    let f16_lines = stdout.lines().filter(|l| l.contains(", f16 compute"));
    let f16_paths: Vec<String> = timed(&f16_lines.collect::<Vec<_>>().join("\n"))
        .into_iter()
        .map(|(path, _, _)| path)
        .collect();
    let expected = if f16_rows {
        vec!["fused-coop"; 2]
    } else {
        vec![]
    };
    assert_eq!(f16_paths, expected, "{stdout}");
    let o = ran(tool().arg("self-check-rows"));
    let rows_out = &o.stdout;
    assert!(o.success(), "{rows_out}");
    assert_eq!(timed(rows_out).len(), 2, "{rows_out}");
}

/// A short soak: mixed calls, results sampled against the reference, memory reported.
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
    // The peak counts the samples beside it (it was below both on 2026-12-07, where it left
    // out the ones after the warm-up and at the end). Without /proc (not Linux) each is n/a.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("host RSS"))
        .expect("the RSS line");
    let mib: Vec<f64> = line
        .split(" MiB")
        .filter_map(|part| part.rsplit(' ').next()?.parse().ok())
        .collect();
    match mib[..] {
        [start, end, peak] => assert!(peak >= start && peak >= end, "{line}"),
        _ => assert_eq!(line.matches("n/a").count(), 3, "{line}"),
    }
    let o = ran(tool().args(["soak", "--calls", "0"]));
    o.usage_error("soak --calls 0", &["--calls", "at least 1"]);
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

/// `devices` marks the adapter a context opens, where `run`, `bench` and the self-check run
/// (`chosen_adapter`): with `WGPU_ADAPTER_NAME` naming the test's own adapter, that one;
/// with a name no adapter has, none, and it says so and exits 1, as a context would fail
/// to open (marking the first adapter regardless fails this); and where the environment
/// holds a switch value no context takes, it says why in one line and exits 2 (bad input,
/// as `run` gives).
#[test]
fn devices_marks_the_adapter_a_context_opens() {
    let Some(ctx) = common::ctx() else { return };
    // The name before any parenthesis: WGPU_ATTENTION_PLAN_AS adds one to the context's
    // (the planner's) name, and lavapipe's vector width is in one.
    let info = ctx.adapter_info();
    let name = info
        .name
        .split(" (")
        .next()
        .unwrap_or(&info.name)
        .to_string();
    let marked = |stdout: &str| -> Vec<String> {
        stdout
            .lines()
            .filter(|l| l.starts_with('[') && l.ends_with(" (default)"))
            .map(str::to_string)
            .collect()
    };
    let o = ran(tool().arg("devices").env("WGPU_ADAPTER_NAME", &name));
    assert!(o.success(), "{}{}", o.stdout, o.stderr);
    let lines = marked(&o.stdout);
    assert_eq!(lines.len(), 1, "{}", o.stdout);
    assert!(lines[0].contains(&name), "{} should name {name}", lines[0]);
    // Its tensor-core line: where the tier runs, after the probe of its operations.
    let coop = o
        .stdout
        .lines()
        .skip_while(|l| !l.ends_with(" (default)"))
        .find_map(|l| l.trim().strip_prefix("fused-coop: "))
        .unwrap_or_else(|| panic!("no fused-coop line: {}", o.stdout));
    match ctx.coop() {
        wgpu_attention::CoopSupport::Unavailable(_) => {
            assert!(coop.starts_with("unavailable: "), "{coop}")
        }
        _ => assert!(coop.ends_with("its operations' probe passed"), "{coop}"),
    }
    let o = ran(tool()
        .arg("devices")
        .env("WGPU_ADAPTER_NAME", "no-adapter-is-named-this"));
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    assert!(marked(&o.stdout).is_empty(), "{}", o.stdout);
    // One line saying why (before 2026-12-07's ninth session a second said "no adapters").
    assert_eq!(error_lines(&o.stderr).len(), 1, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("WGPU_ADAPTER_NAME=no-adapter-is-named-this"),
        "{}",
        o.stderr
    );
    let o = ran(tool()
        .arg("devices")
        .env("WGPU_ADAPTER_NAME", &name)
        .env("WGPU_ATTENTION_COOP_KEY_SPLITS", "9"));
    // A refused variable is input, exit 2 as `run` gives; one error line after the list.
    assert_eq!(o.code, Some(2), "{}{}", o.stdout, o.stderr);
    let why = "no context opens on the default adapter";
    assert!(
        o.stderr.contains(why) && o.stderr.contains("WGPU_ATTENTION_COOP_KEY_SPLITS"),
        "{}",
        o.stderr
    );
    assert_eq!(error_lines(&o.stderr).len(), 1, "{}", o.stderr);
}
