// rope.wgsl — rotary position embedding, in place, on q or k in (B, H, L, HD) layout.
// Position l rotates pair i of each head by angle l * base^(-2i / HD):
//   (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos).
// Pairs: half-split (GPT-NeoX, LLaMA in Hugging Face) pairs c = i with c = i + HD/2;
// interleaved (GPT-J, original RoFormer) pairs c = 2i with c = 2i + 1.
// The cos/sin table (L, HD/2) is computed on the host in f64: f32 sin/cos of large angles
// would lose more accuracy than the rest of the layer.
//
// One dispatch rotates one run of rows row0 .. of x (crate::projection plans the runs so
// that each window of x fits a binding and each dispatch the grid). Where the whole table
// does not fit one binding, each run lies within one head and binds only its positions'
// rows of the table, from pair table_win.
//
// Bindings (group 0):
//   0 params : uniform RopeParams (mirrors src/params.rs)
//   1 table  : storage read  vec2<f32>, (L, HD/2) pairs (cos, sin), all of it or the
//              window from pair table_win
//   2 x      : storage read_write f32, (B, H, L, HD), the window from element x_win
//
// Dispatch: one invocation per (row, pair) of the run, 64 per workgroup, numbered linearly
// (pair fastest) and spread over x and y; surplus invocations return at once.

struct RopeParams {
    total: u32, l: u32, hd: u32, interleaved: u32,
    row0: u32, x_win: u32, table_win: u32, pad: u32,
}

@group(0) @binding(0) var<uniform> p: RopeParams;
@group(0) @binding(1) var<storage, read> table: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let id = (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (id >= p.total) {
        return;
    }
    let half = p.hd / 2u;
    let i = id % half;
    let row = p.row0 + id / half;  // (b * H + h) * L + l
    let pos = row % p.l;
    let cs = table[pos * half + i - p.table_win];
    var i1 = row * p.hd + i - p.x_win;
    var i2 = i1 + half;
    if (p.interleaved != 0u) {
        i1 = row * p.hd + 2u * i - p.x_win;
        i2 = i1 + 1u;
    }
    let x1 = x[i1];
    let x2 = x[i2];
    x[i1] = x1 * cs.x - x2 * cs.y;
    x[i2] = x1 * cs.y + x2 * cs.x;
}
