// narrow_bf16.wgsl — f32 to bfloat16 storage, two values per u32 word (element 2i in the low
// half), rounded to nearest, ties to even, as half::bf16::from_f32 rounds on the host. bf16
// keeps f32's exponent range, so no finite value overflows (except within half an ulp of
// f32's largest, which rounds to infinity as it does on the host); NaN stays NaN. The twin
// of narrow_f16.wgsl, for KvCache::append_gpu on caches made with KvCache::new_bf16 and
// the outputs of crate::fp16::attention_bf16.
//
// Bindings (group 0):
//   0 params : uniform ConvertParams { n: elements, base: first word of this dispatch }
//   1 src    : storage read  f32, n values
//   2 dst    : storage read_write u32, ceil(n / 2) words
//
// Dispatch: one invocation per word from word `base` on, 64 per workgroup, numbered linearly
// over x and y; surplus invocations return at once. The host issues several dispatches when
// the device's workgroup grid holds fewer words than the tensor.

struct ConvertParams {
    n: u32, base: u32, pad1: u32, pad2: u32,
}

@group(0) @binding(0) var<uniform> p: ConvertParams;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

// The bf16 bits of x: its top 16 bits, rounded to nearest even by the 16 dropped.
fn bf16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return (b >> 16u) | 0x40u; // NaN: keep it a (quiet) NaN
    }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

@compute @workgroup_size(64, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lindex: u32) {
    let w = p.base + (wid.x + wid.y * nwg.x) * 64u + lindex;
    if (2u * w >= p.n) {
        return;
    }
    var hi = 0u;
    if (2u * w + 1u < p.n) {
        hi = bf16_bits(src[2u * w + 1u]);
    }
    dst[w] = bf16_bits(src[2u * w]) | (hi << 16u);
}
