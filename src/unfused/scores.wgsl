// scores.wgsl — S = scale * Q Kᵀ + bias for one chunk of (head, query-row) pairs.
//
// Bindings (group 0):
//   0 params : uniform ChunkParams (mirrors src/params.rs field by field; MaskParams: mask.wgsl)
//   1 q      : storage read  f32, window of q (B, Hq, Lq, D); index = absolute - q_win
//   2 k      : storage read  f32, window of k (B, Hkv, kv_rows, D); index = absolute - k_win
//            (kv_rows: Lk, or a KvCache's capacity; key j of kv head h is row h x kv_rows + j)
//   3 bias   : storage read  f32, window of the additive mask's rows (mask.wgsl), or a dummy
//   4 allow  : storage read  u32, window of the mask's allow bits (mask.wgsl), or a dummy
//   5 s      : storage read_write f32, (n_heads, rows, Lk) scores of this chunk, row-major
//
// Shapes: the chunk covers batch-heads bh0 .. bh0+n_heads and query rows row0 .. row0+rows.
// Query head h reads kv head h / group (grouped-query attention, no copies of K/V).
//
// Dispatch: workgroups of 8x8 invocations, each invocation computes a 4x4 block, so one
// workgroup covers a 32-row x 32-key tile. Tiles are numbered linearly (key tile fastest,
// then row tile, then head) and the host spreads them over x and y so that no dimension
// exceeds max_compute_workgroups_per_dimension; surplus workgroups return at once.
//
// Masked entries (causal or allow == 0) are written as the finite sentinel -3.0e38 so that
// a dump of S is readable. The softmax does NOT trust that sentinel: it re-evaluates the
// mask itself, because a legitimate score can be just as negative (a user bias of -1e30).

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
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> allow: array<u32>;
@group(0) @binding(5) var<storage, read_write> s: array<f32>;

const MASKED: f32 = -3.0e38;
const HAS_BIAS: u32 = 1u;
const HAS_ALLOW: u32 = 2u;

fn key_allowed(bh: u32, i: u32, j: u32) -> bool {
    if (p.causal != 0u && i32(j) > i32(i) + p.causal_offset) {
        return false;
    }
    if ((p.mask_flags & HAS_ALLOW) != 0u) {
        let word = allow[allow_word_index(p.mask, bh / p.hq, bh % p.hq, i, j)];
        return ((word >> (j % 32u)) & 1u) != 0u;
    }
    return true;
}

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let tile = wid.x + wid.y * nwg.x;
    if (tile >= p.total_tiles) {
        return;
    }
    let tile_j = tile % p.tiles_x;
    let tile_i = (tile / p.tiles_x) % p.tiles_y;
    let hl = tile / (p.tiles_x * p.tiles_y);
    let bh = p.bh0 + hl;
    let kvh = (bh / p.hq) * p.hkv + (bh % p.hq) / p.group;

    // Local rows r (within the chunk) and keys j handled by this invocation; lanes interleave
    // so neighbouring invocations write neighbouring keys.
    let r0 = tile_i * 32u + lid.y * 4u;
    let j0 = tile_j * 32u + lid.x;
    // Clamp reads into range so the inner loop needs no branches; writes are guarded below.
    let rmax = p.rows - 1u;
    let jmax = p.lk - 1u;
    let qa = (bh * p.lq + p.row0 + min(r0, rmax)) * p.d - p.q_win;
    let qb = (bh * p.lq + p.row0 + min(r0 + 1u, rmax)) * p.d - p.q_win;
    let qc = (bh * p.lq + p.row0 + min(r0 + 2u, rmax)) * p.d - p.q_win;
    let qd = (bh * p.lq + p.row0 + min(r0 + 3u, rmax)) * p.d - p.q_win;
    let kbase = kvh * p.kv_rows;
    let ka = (kbase + min(j0, jmax)) * p.d - p.k_win;
    let kb = (kbase + min(j0 + 8u, jmax)) * p.d - p.k_win;
    let kc = (kbase + min(j0 + 16u, jmax)) * p.d - p.k_win;
    let kd = (kbase + min(j0 + 24u, jmax)) * p.d - p.k_win;

    // Causal: skip the dot products of a tile that lies wholly above the diagonal.
    let first_row = p.row0 + tile_i * 32u;
    let tile_dead = p.causal != 0u && i32(tile_j * 32u) > i32(first_row + 31u) + p.causal_offset;

    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    // Products are summed four values of d at a time, then into the running sums: the
    // rounding error of a sequential f32 sum grows with its length, and where logits are
    // large (inputs x50, scores in the thousands, attention nearly one-hot) it reaches the
    // output. On scripts/torch_parity.py's large-logit data a sum over all D = 64 in one
    // sequence missed the f64 answer by 3.8e-4; sums of four (what the fused tiers' vec4
    // dot products give) by 5.1e-5, as close as PyTorch's own f32 result.
    if (!tile_dead) {
        for (var c0 = 0u; c0 < p.d; c0 = c0 + 4u) {
            var part0 = vec4<f32>(0.0);
            var part1 = vec4<f32>(0.0);
            var part2 = vec4<f32>(0.0);
            var part3 = vec4<f32>(0.0);
            for (var c = c0; c < min(c0 + 4u, p.d); c = c + 1u) {
                let kv = vec4<f32>(k[ka + c], k[kb + c], k[kc + c], k[kd + c]);
                part0 = part0 + q[qa + c] * kv;
                part1 = part1 + q[qb + c] * kv;
                part2 = part2 + q[qc + c] * kv;
                part3 = part3 + q[qd + c] * kv;
            }
            acc0 = acc0 + part0;
            acc1 = acc1 + part1;
            acc2 = acc2 + part2;
            acc3 = acc3 + part3;
        }
    }
    store_row(bh, hl, r0, j0, acc0);
    store_row(bh, hl, r0 + 1u, j0, acc1);
    store_row(bh, hl, r0 + 2u, j0, acc2);
    store_row(bh, hl, r0 + 3u, j0, acc3);
}

fn store_row(bh: u32, hl: u32, r: u32, j0: u32, acc: vec4<f32>) {
    if (r >= p.rows) {
        return;
    }
    let i = p.row0 + r;
    let out_row = (hl * p.rows + r) * p.lk;
    store_one(bh, i, j0, out_row, acc.x);
    store_one(bh, i, j0 + 8u, out_row, acc.y);
    store_one(bh, i, j0 + 16u, out_row, acc.z);
    store_one(bh, i, j0 + 24u, out_row, acc.w);
}

fn store_one(bh: u32, i: u32, j: u32, out_row: u32, dot: f32) {
    if (j >= p.lk) {
        return;
    }
    var value = MASKED;
    if (key_allowed(bh, i, j)) {
        value = p.scale * dot;
        if ((p.mask_flags & HAS_BIAS) != 0u) {
            value = value + bias[bias_index(p.mask, bh / p.hq, bh % p.hq, i, j)];
        }
    }
    s[out_row + j] = value;
}
