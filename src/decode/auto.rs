//! When auto takes decode: the rows per kv head and the keys from which decode beats the
//! other paths, by adapter (GPUs, CPU adapters at 8 and 16 lanes) and width, each with the
//! measurements behind it. The planner (crate::planner) and the tool's choice of vector
//! width (crate::planner::suits_wide) both follow these rules.

use super::MAX_WIDTH;

/// Rows per group (Hq/Hkv x Lq) up to which the planner prefers decode on GPUs, and on CPU
/// adapters that cannot run the subgroup tier.
pub const MAX_AUTO_ROWS: usize = 16;
/// Keys below which splitting is not worth a second kernel.
pub const MIN_AUTO_KEYS: usize = 256;

/// Rows per kv head up to which the planner prefers decode: [`MAX_AUTO_ROWS`], but on a CPU
/// adapter where the subgroup tier runs the problem (`cpu_subgroup_lanes`: its subgroup
/// width), 8 at 8 lanes and 4 at 16. There the subgroup tier serves a GQA group's query
/// heads from one K/V load, and it beat decode from 9 rows at 8 lanes (256-bit vectors) and
/// from 5 at 16 lanes, measured on lavapipe over Lk 256-4096 and D 64-256
/// (docs/measurements.md: "Decode or the subgroup tier"). At 8 lanes decode takes up to 16
/// rows from [`EIGHT_LANE_GROUP_MIN_KEYS`] keys at widths up to 128 ([`auto_rows_at`]).
pub fn auto_rows(cpu_subgroup_lanes: Option<usize>) -> usize {
    match cpu_subgroup_lanes {
        None => MAX_AUTO_ROWS,
        Some(lanes) if lanes >= 16 => 4,
        Some(_) => 8,
    }
}

/// Query positions (Lq) up to which auto takes decode's workgroup form on CPU adapters for
/// problems too wide for the invocation form (D or Dv above [`MAX_WIDTH`]) where the
/// subgroup tier cannot run them (else [`CPU_WIDE_DECODE_ROWS`]), so that the other choice
/// is the unfused path, whatever the GQA group: the form
/// runs at about the same GFLOP/s for any rows, and the unfused path's GFLOP/s grows with
/// Lq (its matrix products have Lq rows a head), crossing it between 8 and 16. Measured on
/// lavapipe (AMD EPYC, 256 bits, `bench --path unfused,decode-workgroup --reps 3`, ms, one
/// run each): 1,8,1,4096,512 88 against 357 unfused; 1,16,1,2048,512 with 1 kv head 27
/// against 363; 1,64,1,2048,512 with 2 kv heads 113 against 1439; 1,8,4,2048,512 73 against
/// 182; 1,8,8,2048,512 114 against 183; but 1,8,16,2048,512 211-223 against 183-185.
pub const CPU_WIDE_AUTO_LQ: usize = 8;

/// Rows per kv head (Hq/Hkv x Lq) up to which auto takes decode's workgroup form on CPU
/// adapters for widths above [`MAX_WIDTH`] where the subgroup tier runs the problem (its
/// wide variant takes widths up to [`crate::fused::SUBGROUP_WIDE_MAX_WIDTH`]); past them the
/// subgroup tier, which serves a GQA group's heads from one K/V load. Measured on lavapipe
/// (Intel Xeon, 2026-12-02, `bench --shape S --path decode-workgroup,fused-subgroup --reps
/// 5`, ms, decode-workgroup at 256 bits against the subgroup tier at 512, one run each):
/// 1 row (1,8,1,4096,512) 68.2 against 100.2; 2 rows (1,2,1,300,384, one kv head) 1.8
/// against 1.2 at 256 bits, 1.0 against 1.2 at 512; 4 rows (1,8,4,2048,512) 58.7 against
/// 36.4; 16 rows (1,16,1,2048,512, one kv head: multi-head latent attention's decode) 24.6
/// against 5.2; 128 rows (1,16,8,2048,512, one kv head) 188 against 13.4.
pub const CPU_WIDE_DECODE_ROWS: usize = 2;

/// Fewest keys from which decode at 8 lanes (256-bit vectors) beats the subgroup tier at 16
/// lanes for 5 to [`auto_rows`]`(Some(8))` query rows per kv head, widths up to
/// [`MAX_WIDTH`] (decode's invocation form; wider decode shapes run its workgroup form on
/// CPU adapters, [`CPU_WIDE_DECODE_ROWS`]): where crate::planner::suits_wide keeps 8
/// lanes for those rows too.
/// Measured on lavapipe (Intel Xeon, 2026-12-02, the build of a5baaad, `bench --shape S
/// --kv-heads 8 --path decode,fused-subgroup --reps 5` with `LP_NATIVE_VECTOR_WIDTH` 256 and
/// 512, two rounds, ms, decode at 256 against the subgroup tier at 512): 8 rows
/// (1,64,1,LK,128) 7.2-7.5 against 13.7-13.9 at Lk 4096 and 41-57 against 77 at 16 384;
/// 5 rows (1,40,1,LK,128) 2.1-2.3 against 2.9 at 1024, 1.3-1.4 against 1.5-1.6 at 512, but
/// 0.9-1.1 against 0.9 at 256; 8 rows at D 64 (1,64,1,LK,64) 3.7-3.8 against 6.0-6.1 at
/// 4096 and 1.2-1.3 against 1.5 at 1024, and (1,8,8,256,64) 0.6 against 0.5; wider, 8 rows
/// (1,64,1,LK,256) 19.4-21.8 against 25.0-25.1 at 4096 and 4.3-4.6 against 5.1 at 1024, 5
/// rows (1,40,1,2048,160) 4.4-8.8 against 6.3-10.4. From 10 rows
/// the subgroup tier at 16 lanes won at Lk 256-1024; at 12 rows and Lk 4096 decode still did
/// (10.4-10.9 against 12.5-13.5 at 1,32,3,4096,128), so the bound on rows is the planner's.
/// The rule before (4 rows at 16 lanes; docs/measurements.md, "Decode or the subgroup
/// tier", 2026-11-30) dates from before decode's 64-bit loads, when decode at 256 bits took
/// 12.7 ms at 1,32,1,4096,128 (now 4.2-8.4).
pub const EIGHT_LANE_DECODE_MIN_KEYS: usize = 1024;

/// Fewest keys from which auto takes decode at 8 lanes (256-bit vectors) for 9 to
/// [`MAX_AUTO_ROWS`] query rows per kv head, at widths up to 128 (decode's invocation form
/// takes them in one tile: [`invocation_tile_rows`](super::split::invocation_tile_rows));
/// crate::planner::suits_wide keeps 8 lanes for them too. Measured on lavapipe (Intel Xeon, 2026-12-02, `bench --shape S
/// --kv-heads 8 --path decode,fused-subgroup --reps 5 --json` with `LP_NATIVE_VECTOR_WIDTH`
/// 256, and `--path fused-subgroup` at 512, two rounds, ms, decode at 256 against the
/// subgroup tier at 256 and at 512): 12 rows (1,32,3,2048,128) 4.8 / 4.2 against 8.1 / 8.2
/// and 6.8 / 6.8; 16 rows (1,32,4,2048,128) 5.4 / 5.4 against 8.4 / 8.4 and 6.7 / 7.1, at
/// D 64 (1,8,16,2048,64) 2.6 / 2.7 against 4.2 / 4.1 and 3.0 / 3.3; 10 rows
/// (1,40,2,2048,128) 3.9 / 3.7 against 8.5 / 7.8 and 6.7 / 6.7, (1,8,10,2048,64) 2.2 / 2.0
/// against 4.4 / 4.1 and 3.0 / 3.0; longer rows more so (1,32,4,16384,128: 34.5 / 37.2
/// against 84.1 / 86.0 at 512). At 1024 keys the subgroup tier at 512 bits ties or wins:
/// 12 rows (1,8,12,1024,64) 1.6 / 1.6 against 1.6 / 1.6, 16 rows (1,32,4,1024,128) 3.8 /
/// 3.8 against 3.3 / 3.0.
pub const EIGHT_LANE_GROUP_MIN_KEYS: usize = 2048;

/// Whether decode at 8 lanes suits `rows_per_kv_head` query rows per kv head over `lk` keys
/// at width `width` (the wider of D and Dv) better than anything at 16 lanes: what decode
/// takes at 16 lanes ([`auto_rows_at`]), and from [`EIGHT_LANE_DECODE_MIN_KEYS`] keys what
/// it takes at 8 lanes at widths up to [`MAX_WIDTH`] (up to 8 rows per kv head, and up to 16
/// from [`EIGHT_LANE_GROUP_MIN_KEYS`] keys at widths up to 128).
/// crate::planner::suits_wide keeps 8 lanes for these.
pub fn suits_eight_lanes(rows_per_kv_head: usize, lk: usize, width: usize) -> bool {
    is_decode_shape(rows_per_kv_head, lk, auto_rows_at(Some(16), width, lk))
        || (width <= MAX_WIDTH
            && is_decode_shape(rows_per_kv_head, lk, auto_rows_at(Some(8), width, lk))
            && lk >= EIGHT_LANE_DECODE_MIN_KEYS)
}

/// Rows per kv head up to which auto prefers decode for a problem of `lk` keys whose wider
/// width is `width`: [`auto_rows`], but [`CPU_WIDE_DECODE_ROWS`] above [`MAX_WIDTH`] on CPU
/// adapters where the subgroup tier runs the problem (`cpu_subgroup_lanes`), and
/// [`MAX_AUTO_ROWS`] at 8 lanes from [`EIGHT_LANE_GROUP_MIN_KEYS`] keys at widths up to
/// 128. The planner and crate::planner::suits_wide both follow it.
pub fn auto_rows_at(cpu_subgroup_lanes: Option<usize>, width: usize, lk: usize) -> usize {
    match cpu_subgroup_lanes {
        Some(_) if width > MAX_WIDTH => CPU_WIDE_DECODE_ROWS,
        Some(lanes)
            if lanes < 16
                && width <= crate::fused::MAX_WIDTH
                && lk >= EIGHT_LANE_GROUP_MIN_KEYS =>
        {
            MAX_AUTO_ROWS
        }
        lanes => auto_rows(lanes),
    }
}

/// Whether a problem is a decode shape: at most `max_rows` ([`auto_rows`]) query rows per kv
/// head (Hq/Hkv x Lq) over at least [`MIN_AUTO_KEYS`] keys. The planner prefers decode for
/// these (where decode can run them), and crate::profile::cpu_vectors keeps lavapipe's 8 lanes for
/// them.
pub fn is_decode_shape(rows_per_kv_head: usize, lk: usize, max_rows: usize) -> bool {
    rows_per_kv_head <= max_rows && lk >= MIN_AUTO_KEYS
}
