// pad_columns.wgsl — copies a row-major matrix into one with a different row width: columns
// past the source width become 0, columns past the destination width are dropped. The
// fused and decode paths read q, k, v and write o as vec4, so a D or Dv that is not a
// multiple of 4 is padded with zero columns before them (zeros leave every score and every
// kept output column unchanged) and the output is narrowed back after.
//
// Bindings (group 0):
//   0 params : uniform PadParams { rows, src_cols, dst_cols, base, src_start, dst_start }
//   1 src    : storage read  f32, a window whose rows x src_cols start at element src_start
//   2 dst    : storage read_write f32, a window whose rows x dst_cols start at dst_start
//
// Dispatch: one invocation per destination element from element `base` on, 64 per
// workgroup, numbered linearly over x and y; surplus invocations return at once. The host
// issues several dispatches (each with its own base) when the device's workgroup grid is
// smaller than the matrix, and several windows of rows when a matrix is larger than a
// binding.

struct PadParams {
    rows: u32, src_cols: u32, dst_cols: u32, base: u32,
    src_start: u32, dst_start: u32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> p: PadParams;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let e = p.base + (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (e >= p.rows * p.dst_cols) {
        return;
    }
    let r = e / p.dst_cols;
    let c = e % p.dst_cols;
    var x = 0.0;
    // Only columns the source has are read, so every read is inside the source.
    if (c < p.src_cols) {
        x = src[p.src_start + r * p.src_cols + c];
    }
    dst[p.dst_start + e] = x;
}
