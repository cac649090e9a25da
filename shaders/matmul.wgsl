// matmul.wgsl — C = A B (+ bias), for the projections of the multi-head attention module.
// A is (M, K), B is (K, N) row-major, C is (M, N). A and C may instead be in head-split
// layout: row m = b * L + l and column n = h * HD + c live at ((b * H + h) * L + l) * HD + c,
// which is the (B, H, L, HD) layout attention takes, so splitting and merging heads cost no
// extra pass.
//
// Bindings (group 0):
//   0 params : uniform MatmulParams (mirrors src/params.rs)
//   1 a      : storage read  f32
//   2 b      : storage read  f32
//   3 bias   : storage read  f32, N values (or a dummy when has_bias is 0)
//   4 c      : storage read_write f32
//
// Dispatch: workgroups of 8x8 invocations, each computing 4 rows x 4 columns (a 32 x 32 tile
// per workgroup), numbered linearly (column tile fastest) and spread over x and y.

struct MatmulParams {
    m: u32, k: u32, n: u32, a_split: u32,
    c_split: u32, l: u32, h: u32, hd: u32,
    has_bias: u32, tiles_x: u32, total: u32, pad0: u32,
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
    let r0 = (tile / p.tiles_x) * 32u + lid.y * 4u;
    let c0 = (tile % p.tiles_x) * 32u + lid.x;
    // Reads clamped into range; writes guarded below.
    let ra = min(r0, p.m - 1u);
    let rb = min(r0 + 1u, p.m - 1u);
    let rc = min(r0 + 2u, p.m - 1u);
    let rd = min(r0 + 3u, p.m - 1u);
    let ca = min(c0, p.n - 1u);
    let cb = min(c0 + 8u, p.n - 1u);
    let cc = min(c0 + 16u, p.n - 1u);
    let cd = min(c0 + 24u, p.n - 1u);
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var kk = 0u; kk < p.k; kk = kk + 1u) {
        let bv = vec4<f32>(b[kk * p.n + ca], b[kk * p.n + cb], b[kk * p.n + cc], b[kk * p.n + cd]);
        acc0 = acc0 + a[at(ra, kk, p.k, p.a_split)] * bv;
        acc1 = acc1 + a[at(rb, kk, p.k, p.a_split)] * bv;
        acc2 = acc2 + a[at(rc, kk, p.k, p.a_split)] * bv;
        acc3 = acc3 + a[at(rd, kk, p.k, p.a_split)] * bv;
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

fn store(row: u32, c0: u32, v: vec4<f32>) {
    if (row >= p.m) {
        return;
    }
    if (c0 < p.n) { c[at(row, c0, p.n, p.c_split)] = v.x; }
    if (c0 + 8u < p.n) { c[at(row, c0 + 8u, p.n, p.c_split)] = v.y; }
    if (c0 + 16u < p.n) { c[at(row, c0 + 16u, p.n, p.c_split)] = v.z; }
    if (c0 + 24u < p.n) { c[at(row, c0 + 24u, p.n, p.c_split)] = v.w; }
}
