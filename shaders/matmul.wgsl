// matmul.wgsl — C = A B (+ bias), for the projections of the multi-head attention module.
// A is (M, K), B is (K, N) row-major, C is (M, N). A and C may instead be in head-split
// layout: row m = b * L + l and column n = h * HD + c live at ((b * H + h) * L + l) * HD + c,
// which is the (B, H, L, HD) layout attention takes, so splitting and merging heads cost no
// extra pass.
//
// One dispatch computes one piece (crate::projection plans them so that every window fits a
// binding and every dispatch the grid): rows row0 .. row0 + m, output columns n0 .. n0 + nn,
// over reduction indices k0 .. k0 + kn; a piece with `accumulate` adds its partial sums to
// C (a later range of heads of a head-split A), the others write C.
//
// Bindings (group 0):
//   0 params : uniform MatmulParams (mirrors src/params.rs)
//   1 a      : storage read  f32, the window of A from element a_win
//   2 b      : storage read  f32, all of B
//   3 bias   : storage read  f32, N values (or a dummy when has_bias is 0)
//   4 c      : storage read_write f32, the window of C from element c_win
//
// Dispatch: workgroups of 8x8 invocations, each computing 4 rows x 4 columns (a 32 x 32 tile
// per workgroup) of the piece, numbered linearly (column tile fastest) and spread over x
// and y.

struct MatmulParams {
    m: u32, k: u32, n: u32, a_split: u32,
    c_split: u32, l: u32, h: u32, hd: u32,
    has_bias: u32, tiles_x: u32, total: u32, row0: u32,
    k0: u32, kn: u32, n0: u32, nn: u32,
    a_win: u32, c_win: u32, accumulate: u32, pad0: u32,
}

@group(0) @binding(0) var<uniform> p: MatmulParams;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;

// Index of element (row, col) of a matrix with `cols` columns, plain or head-split.
fn at(row: u32, col: u32, cols: u32, split: u32) -> u32 {
    if (split == 0u) {
        return row * cols + col;
    }
    let bb = row / p.l;
    let ll = row % p.l;
    let hh = col / p.hd;
    return ((bb * p.h + hh) * p.l + ll) * p.hd + col % p.hd;
}

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let tile = wid.x + wid.y * nwg.x;
    if (tile >= p.total) {
        return;
    }
    // Rows and columns within the piece; reads clamped into it, writes guarded below.
    let r0 = (tile / p.tiles_x) * 32u + lid.y * 4u;
    let c0 = (tile % p.tiles_x) * 32u + lid.x;
    let ra = p.row0 + min(r0, p.m - 1u);
    let rb = p.row0 + min(r0 + 1u, p.m - 1u);
    let rc = p.row0 + min(r0 + 2u, p.m - 1u);
    let rd = p.row0 + min(r0 + 3u, p.m - 1u);
    let ca = p.n0 + min(c0, p.nn - 1u);
    let cb = p.n0 + min(c0 + 8u, p.nn - 1u);
    let cc = p.n0 + min(c0 + 16u, p.nn - 1u);
    let cd = p.n0 + min(c0 + 24u, p.nn - 1u);
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var kk = p.k0; kk < p.k0 + p.kn; kk = kk + 1u) {
        let bv = vec4<f32>(b[kk * p.n + ca], b[kk * p.n + cb], b[kk * p.n + cc], b[kk * p.n + cd]);
        acc0 = acc0 + a[at(ra, kk, p.k, p.a_split) - p.a_win] * bv;
        acc1 = acc1 + a[at(rb, kk, p.k, p.a_split) - p.a_win] * bv;
        acc2 = acc2 + a[at(rc, kk, p.k, p.a_split) - p.a_win] * bv;
        acc3 = acc3 + a[at(rd, kk, p.k, p.a_split) - p.a_win] * bv;
    }
    if (p.has_bias != 0u) {
        let bb = vec4<f32>(bias[ca], bias[cb], bias[cc], bias[cd]);
        acc0 = acc0 + bb;
        acc1 = acc1 + bb;
        acc2 = acc2 + bb;
        acc3 = acc3 + bb;
    }
    store(r0, c0, acc0);
    store(r0 + 1u, c0, acc1);
    store(r0 + 2u, c0, acc2);
    store(r0 + 3u, c0, acc3);
}

// Writes (or adds, for an accumulating piece) one value of C, if (row, col) of the piece is in it.
fn put(row: u32, col: u32, x: f32) {
    if (col >= p.nn) {
        return;
    }
    let i = at(p.row0 + row, p.n0 + col, p.n, p.c_split) - p.c_win;
    if (p.accumulate != 0u) {
        c[i] = c[i] + x;
    } else {
        c[i] = x;
    }
}

fn store(row: u32, c0: u32, v: vec4<f32>) {
    if (row >= p.m) {
        return;
    }
    put(row, c0, v.x);
    put(row, c0 + 8u, v.y);
    put(row, c0 + 16u, v.z);
    put(row, c0 + 24u, v.w);
}
