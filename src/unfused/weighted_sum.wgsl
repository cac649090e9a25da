// weighted_sum.wgsl — O = P V for one chunk of (head, query-row) pairs.
//
// Bindings (group 0):
//   0 params : uniform ChunkParams (mirrors src/params.rs; MaskParams: mask.wgsl)
//   1 pw     : storage read  f32, (n_heads, rows, Lk) attention weights of this chunk
//   2 v      : storage read  f32, window of v (B, Hkv, kv_rows, Dv); index = absolute - v_win
//            (kv_rows: Lk, or a KvCache's capacity; key j of kv head h is row h x kv_rows + j)
//   3 o      : storage read_write f32, window of out (B, Hq, Lq, Dv); index = absolute - o_win
//
// Dispatch: workgroups of 8x8 invocations, each computing 4 rows x 4 columns, so one
// workgroup covers a 32-row x 32-column output tile. Tiles are numbered linearly (column tile
// fastest, then row tile, then head) and spread over x and y by the host.
//
// Causal: keys past the last row's diagonal have P = 0, so the loop stops there. Fully masked
// rows have P = 0 everywhere and produce zeros.

struct ChunkParams {
    n_heads: u32, rows: u32, lq: u32, lk: u32,
    d: u32, dv: u32, row0: u32, bh0: u32,
    hq: u32, hkv: u32, group: u32, causal: u32,
    causal_offset: i32, mask_flags: u32, scale: f32, total_tiles: u32,
    q_win: u32, k_win: u32, v_win: u32, o_win: u32,
    lse_win: u32, tiles_x: u32, tiles_y: u32, kv_rows: u32,
    mask: MaskParams,
}

@group(0) @binding(0) var<uniform> p: ChunkParams;
@group(0) @binding(1) var<storage, read> pw: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let tile = wid.x + wid.y * nwg.x;
    if (tile >= p.total_tiles) {
        return;
    }
    let tile_c = tile % p.tiles_x;
    let tile_i = (tile / p.tiles_x) % p.tiles_y;
    let hl = tile / (p.tiles_x * p.tiles_y);
    let bh = p.bh0 + hl;
    let kvh = (bh / p.hq) * p.hkv + (bh % p.hq) / p.group;

    let r0 = tile_i * 32u + lid.y * 4u;
    let c0 = tile_c * 32u + lid.x;
    let rmax = p.rows - 1u;
    let cmax = p.dv - 1u;
    // Reads clamped into range (no branches in the loop); writes guarded in store_row.
    let pa = (hl * p.rows + min(r0, rmax)) * p.lk;
    let pb = (hl * p.rows + min(r0 + 1u, rmax)) * p.lk;
    let pc = (hl * p.rows + min(r0 + 2u, rmax)) * p.lk;
    let pd = (hl * p.rows + min(r0 + 3u, rmax)) * p.lk;
    let vbase = kvh * p.kv_rows * p.dv - p.v_win;
    let ca = min(c0, cmax);
    let cb = min(c0 + 8u, cmax);
    let cc = min(c0 + 16u, cmax);
    let cd = min(c0 + 24u, cmax);

    var end = p.lk;
    if (p.causal != 0u) {
        let last_row = p.row0 + min(r0 + 3u, rmax);
        end = u32(clamp(i32(last_row) + p.causal_offset + 1, 0, i32(p.lk)));
    }

    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var j = 0u; j < end; j = j + 1u) {
        let vr = vbase + j * p.dv;
        let vv = vec4<f32>(v[vr + ca], v[vr + cb], v[vr + cc], v[vr + cd]);
        acc0 = acc0 + pw[pa + j] * vv;
        acc1 = acc1 + pw[pb + j] * vv;
        acc2 = acc2 + pw[pc + j] * vv;
        acc3 = acc3 + pw[pd + j] * vv;
    }
    store_row(bh, r0, c0, acc0);
    store_row(bh, r0 + 1u, c0, acc1);
    store_row(bh, r0 + 2u, c0, acc2);
    store_row(bh, r0 + 3u, c0, acc3);
}

fn store_row(bh: u32, r: u32, c0: u32, acc: vec4<f32>) {
    if (r >= p.rows) {
        return;
    }
    let at = (bh * p.lq + p.row0 + r) * p.dv - p.o_win;
    if (c0 < p.dv) { o[at + c0] = acc.x; }
    if (c0 + 8u < p.dv) { o[at + c0 + 8u] = acc.y; }
    if (c0 + 16u < p.dv) { o[at + c0 + 16u] = acc.z; }
    if (c0 + 24u < p.dv) { o[at + c0 + 24u] = acc.w; }
}
