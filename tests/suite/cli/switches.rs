//! The tool under the library's switches (its `WGPU_ATTENTION_` variables, for testing and
//! timing): the tensor-core tier's variants, lanes and options, and decode-workgroup's
//! loads, staging of K and merge lanes, each run checked against the reference.

use super::*;

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
/// would not fit 32 KiB), and score tiles of one row of blocks
/// (`WGPU_ATTENTION_COOP_SCORE_ROWS=1`, the layout before 2026-12-07; the others run two rows
/// where the blocks allow, as at 32 lanes with 32-key and 64-key blocks). Held to
/// the f16 rule by `run --check`, GQA, a bool mask, both causal alignments, Dv != D, large
/// logits (the accumulators' rescaling).
#[test]
fn coop_runs_with_other_subgroup_sizes() {
    if common::ctx().is_none() {
        return;
    }
    let (_dir, cases) = lane_cases("coop-lanes");
    // (lanes, the variant forced, the keys a block it runs, the K/V prefetch, the rows of
    // output blocks a subgroup's tile spans at most, the weights in two parts where they
    // fit, the rows of score blocks likewise): a variant that cannot run the problem here
    // (64x64k64: D 128, and 37 780 bytes) is not taken, and the reason says so.
    for (lanes, variant, keys, prefetch, out_rows, split, score_rows) in [
        ("16", "", 32, "0", "2", "1", "2"),
        ("64", "", 32, "0", "2", "1", "2"),
        ("128", "", 32, "0", "2", "1", "2"),
        ("32", "32x128k64", 64, "0", "2", "1", "2"),
        ("128", "32x128k64", 64, "0", "2", "1", "2"),
        ("32", "64x64k64", 32, "0", "2", "1", "2"),
        ("32", "", 32, "1", "2", "1", "2"),
        ("16", "32x128k64", 64, "1", "2", "1", "2"),
        ("32", "", 32, "0", "1", "1", "2"),
        ("16", "", 32, "0", "1", "1", "2"),
        ("32", "", 32, "0", "2", "0", "2"),
        ("32", "", 32, "0", "2", "1", "1"),
    ] {
        for case in &cases {
            let o = checked_coop_run(
                case,
                &[
                    ("WGPU_ATTENTION_COOP_LANES", lanes),
                    ("WGPU_ATTENTION_COOP_VARIANT", variant),
                    ("WGPU_ATTENTION_COOP_PREFETCH", prefetch),
                    ("WGPU_ATTENTION_COOP_OUT_ROWS", out_rows),
                    ("WGPU_ATTENTION_COOP_SPLIT_P", split),
                    ("WGPU_ATTENTION_COOP_SCORE_ROWS", score_rows),
                ],
            );
            let q = &case.0;
            let (stdout, stderr) = (&o.stdout, &o.stderr);
            let what = format!(
                "{lanes} lanes, {variant} prefetch {prefetch} rows {out_rows} split {split} \
                 score rows {score_rows}, {q}"
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
            assert_eq!(
                stderr.contains("score blocks in one row a subgroup"),
                score_rows == "1",
                "{what}: {stderr}"
            );
            assert!(
                stdout.contains("fused-coop computes in f16"),
                "{what}: {stdout}"
            );
        }
    }
}

/// The problems the lane tests run, in a folder `name` (removed when the first value
/// drops): GQA with a bool mask that empties a row, bottom-right, D 128, Dv 100, large
/// logits; and two batches top-left, D 64, Dv 48.
fn lane_cases(name: &str) -> (common::TempDir, [CoopCase; 2]) {
    let dir = tmpdir(name);
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
    (dir, cases)
}

/// The tier on a driver whose subgroups are smaller than the kernel assumes
/// (`WGPU_ATTENTION_COOP_DRIVER_LANES` under `WGPU_ATTENTION_COOP_LANES`): each of its
/// subgroups computes whole blocks of the kernel's, the same values written by each, as
/// crate::profile's `coop_support` says a driver that picked a smaller size than the
/// adapter's largest would run it. Held to the f16 rule by `run --check`, with the probe of
/// the operations and each pipeline's check run as on the hardware
/// (`WGPU_ATTENTION_COOP_CHECK=1`), which must pass: 64 lanes run as 32 and as 16, 32 as 16,
/// on 32-key and 64-key blocks.
#[test]
fn coop_runs_on_smaller_driver_subgroups() {
    if common::ctx().is_none() {
        return;
    }
    let (_dir, cases) = lane_cases("coop-driver-lanes");
    for (lanes, driver, variant) in [
        ("64", "32", ""),
        ("64", "16", ""),
        ("32", "16", ""),
        ("64", "32", "32x128k64"),
    ] {
        for case in &cases {
            let o = checked_coop_run(
                case,
                &[
                    ("WGPU_ATTENTION_COOP_LANES", lanes),
                    ("WGPU_ATTENTION_COOP_DRIVER_LANES", driver),
                    ("WGPU_ATTENTION_COOP_VARIANT", variant),
                    ("WGPU_ATTENTION_COOP_CHECK", "1"),
                ],
            );
            let what = format!("{lanes} lanes run on {driver} {variant}, {}", case.0);
            let (stdout, stderr) = (&o.stdout, &o.stderr);
            assert!(o.success(), "{what}: {stdout}{stderr}");
            assert!(stderr.contains("path fused-coop"), "{what}: {stderr}");
            assert!(
                stdout.contains("fused-coop computes in f16"),
                "{what}: {stdout}"
            );
        }
    }
}

/// One problem for `run --check`: q, k and v files, a mask file or none, the causal rule.
type CoopCase = (String, String, String, Option<String>, &'static str);

/// `run --dtype f16 --path fused-coop --check` on `case` with the tier emulated and the
/// switches `envs` set.
fn checked_coop_run((q, k, v, mask, causal): &CoopCase, envs: &[(&str, &str)]) -> Ran {
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
    let mut cmd = tool();
    cmd.env("WGPU_ATTENTION_COOP", "emulate");
    for (name, value) in envs {
        cmd.env(name, value);
    }
    ran(cmd.args(&args))
}

/// The tier's keys in ranges side by side (`WGPU_ATTENTION_COOP_KEY_SPLITS`, 2, 3 and 8),
/// each range's workgroups writing a partial output that the merge combines, held to the
/// f16 rule by `run --check`: GQA with a bool mask that empties a row, bottom-right causal
/// (the first rows' last visible key precedes the last range), top-left with Lq < Lk
/// (every row sees only the first range: the others give no weight), large logits; 8
/// asked over 300 keys run as 5 ranges (a range holds 64 keys at least). The plan's reason
/// gives the ranges.
#[test]
fn coop_splits_the_keys_side_by_side() {
    if common::ctx().is_none() {
        return;
    }
    let dir = tmpdir("coop-key-splits");
    let mut rng = Rng::new(38);
    let mut allow = rng.bool_array(&[1, 1, 77, 300], 0.7);
    allow.slice_mut(ndarray::s![0, 0, 5, ..]).fill(false);
    let cases = [
        (
            save(&dir, "q1.npy", &rng.array(&[1, 4, 77, 64], 4.0)),
            save(&dir, "k1.npy", &rng.array(&[1, 2, 300, 64], 4.0)),
            save(&dir, "v1.npy", &rng.array(&[1, 2, 300, 48], 1.0)),
            Some(save_bool(&dir, "m1.npy", &allow)),
            "bottom-right",
        ),
        (
            save(&dir, "q2.npy", &rng.array(&[2, 2, 70, 64], 6.0)),
            save(&dir, "k2.npy", &rng.array(&[2, 2, 300, 64], 6.0)),
            save(&dir, "v2.npy", &rng.array(&[2, 2, 300, 48], 1.0)),
            None,
            "top-left",
        ),
    ];
    // (splits asked, key ranges over 300 keys: each a multiple of 64 keys, at least
    // 300 / splits).
    for (splits, ranges) in [("2", 2), ("3", 3), ("8", 5)] {
        for case in &cases {
            let o = checked_coop_run(case, &[("WGPU_ATTENTION_COOP_KEY_SPLITS", splits)]);
            let q = &case.0;
            let (stdout, stderr) = (&o.stdout, &o.stderr);
            let what = format!("{splits} splits, {q}");
            assert!(o.success(), "{what}: {stdout}{stderr}");
            assert!(stderr.contains("path fused-coop"), "{what}: {stderr}");
            let how = format!(
                "in {ranges} key ranges side by side (WGPU_ATTENTION_COOP_KEY_SPLITS), merged"
            );
            assert!(stderr.contains(&how), "{what}: {stderr}");
        }
    }
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
