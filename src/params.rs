//! Uniform structs shared with the shaders. Each mirrors a WGSL struct field by field:
//! change both together (the naga test in `tests/suite/shaders.rs` checks the sizes agree).

use bytemuck::{Pod, Zeroable};

/// Bit in [`ChunkParams::mask_flags`]: an additive float bias is bound.
pub const MASK_HAS_BIAS: u32 = 1;
/// Bit in [`ChunkParams::mask_flags`]: an allow (boolean) mask is bound.
pub const MASK_HAS_ALLOW: u32 = 2;

/// Where a chunk's kernels find the mask (`shaders/mask.wgsl`): window starts and strides
/// over (b, h, i) of its two parts ([`crate::problem::MaskData`]). Key j of a row is
/// element j of the bias row (f32 elements) and bit j % 32 of word j / 32 of the allow row
/// (u32 words). Zero where a part is absent. Embedded at a 16-byte offset of each kernel's
/// parameters (WGSL aligns a struct member of a uniform struct to 16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct MaskParams {
    /// Window start of the bias, in f32 elements (a multiple of 4).
    pub b_win: u32,
    /// Bias strides over (b, h, i), in f32 elements; 0 on broadcast dimensions.
    pub b_sb: u32,
    /// See `b_sb`.
    pub b_sh: u32,
    /// See `b_sb`.
    pub b_si: u32,
    /// Window start of the allow bits, in u32 words.
    pub a_win: u32,
    /// Allow strides over (b, h, i), in u32 words; 0 on broadcast dimensions.
    pub a_sb: u32,
    /// See `a_sb`.
    pub a_sh: u32,
    /// See `a_sb`.
    pub a_si: u32,
}

/// Parameters of one chunk of work for the unfused kernels (`scores`, `softmax`,
/// `weighted_sum`). Indices into bound buffers are absolute element indices minus the
/// `*_win` start of the bound window, so a chunk can bind a slice of a large buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ChunkParams {
    /// Batch-heads in this chunk.
    pub n_heads: u32,
    /// Query rows per head in this chunk.
    pub rows: u32,
    /// Full query length.
    pub lq: u32,
    /// Full key length.
    pub lk: u32,
    /// Query/key width.
    pub d: u32,
    /// Value width.
    pub dv: u32,
    /// First query row of the chunk.
    pub row0: u32,
    /// First batch-head (b * Hq + h) of the chunk.
    pub bh0: u32,
    /// Query heads.
    pub hq: u32,
    /// Key/value heads.
    pub hkv: u32,
    /// Hq / Hkv.
    pub group: u32,
    /// 1 when a causal rule applies.
    pub causal: u32,
    /// Query i may see key j iff j <= i + causal_offset (0 top-left, Lk - Lq bottom-right).
    pub causal_offset: i32,
    /// [`MASK_HAS_BIAS`] | [`MASK_HAS_ALLOW`].
    pub mask_flags: u32,
    /// Multiplier of Q Kᵀ.
    pub scale: f32,
    /// Workgroups that do work in this dispatch (the rest return at once).
    pub total_tiles: u32,
    /// Window starts, in elements, of q, k, v, out and lse.
    pub q_win: u32,
    /// See `q_win`.
    pub k_win: u32,
    /// See `q_win`.
    pub v_win: u32,
    /// See `q_win`.
    pub o_win: u32,
    /// See `q_win`.
    pub lse_win: u32,
    /// Tiles along the fastest-varying tile axis.
    pub tiles_x: u32,
    /// Tiles along the second axis.
    pub tiles_y: u32,
    /// Rows each kv head holds in the K and V buffers (`lk`, or a cache's capacity).
    pub kv_rows: u32,
    /// The mask's windows and strides (at byte offset 96).
    pub mask: MaskParams,
}

/// Parameters of one chunk for the fused kernels (`fused_subgroup`, `fused_portable`,
/// `fused_tiled`, `fused_coop`).
/// Window starts of q, k, v and out are in vec4 elements (those bindings are `vec4<f32>`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct FusedParams {
    /// Batch-heads in this chunk.
    pub n_heads: u32,
    /// Full query length.
    pub lq: u32,
    /// Full key length.
    pub lk: u32,
    /// First batch-head of the chunk.
    pub bh0: u32,
    /// Query heads.
    pub hq: u32,
    /// Key/value heads.
    pub hkv: u32,
    /// Hq / Hkv.
    pub group: u32,
    /// Query i may see key j iff j <= i + causal_offset (when the CAUSAL override is set).
    pub causal_offset: i32,
    /// Multiplier of Q Kᵀ.
    pub scale: f32,
    /// First query row of the chunk.
    pub row0: u32,
    /// Query rows per head in this chunk.
    pub rows: u32,
    /// Workgroups that do work (the rest return at once).
    pub total_groups: u32,
    /// Window start of q, in vec4 elements.
    pub q_win: u32,
    /// Window start of k, in vec4 elements.
    pub k_win: u32,
    /// Window start of v, in vec4 elements.
    pub v_win: u32,
    /// Window start of out, in vec4 elements.
    pub o_win: u32,
    /// Window start of the LSE, in elements.
    pub lse_win: u32,
    /// Workgroups per head (per unit on the subgroup, tiled and cooperative-matrix tiers)
    /// along the rows.
    pub row_groups: u32,
    /// First key of this pass (a multiple of the tier's key block).
    pub key0: u32,
    /// End of this pass's keys (exclusive, at most `lk`).
    pub key1: u32,
    /// Rows per batch-head in the output binding: `lq`, or in a key pass the rows of all
    /// passes of one head in the partial buffer.
    pub o_rows: u32,
    /// Subgroup, tiled and cooperative-matrix tiers: query heads per unit, the heads that
    /// share one kv head and whose rows one workgroup may mix (the GQA group when the chunk
    /// holds whole groups, else 1); 1 on the portable tier.
    pub unit_heads: u32,
    /// Subgroup and cooperative-matrix tiers: key ranges run side by side in this dispatch
    /// (1 on the others).
    /// Workgroups are numbered range-major; range s takes keys key0 + s x n .. (n: (key1 -
    /// key0) / splits rounded up to the key block) and writes its rows s x rows further on
    /// in the partial buffers.
    pub splits: u32,
    /// Rows each kv head holds in the K and V buffers (`lk`, or a cache's capacity).
    pub kv_rows: u32,
    /// The mask's windows and strides (at byte offset 96).
    pub mask: MaskParams,
}

/// Parameters of one chunk for `decode_partial.wgsl` and `decode_workgroup.wgsl`. A group
/// is one (batch, kv head) pair
/// with its `rows = (Hq / Hkv) * Lq` query rows.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct DecodeParams {
    /// Full query length.
    pub lq: u32,
    /// Full key length.
    pub lk: u32,
    /// Query heads.
    pub hq: u32,
    /// Key/value heads.
    pub hkv: u32,
    /// Hq / Hkv.
    pub group: u32,
    /// Query i may see key j iff j <= i + causal_offset (when the CAUSAL override is set).
    pub causal_offset: i32,
    /// Multiplier of Q Kᵀ.
    pub scale: f32,
    /// Query rows per group.
    pub rows: u32,
    /// Key splits per group.
    pub splits: u32,
    /// Keys per split (a multiple of 4; of 64 in decode_workgroup.wgsl).
    pub keys_per_split: u32,
    /// Row tiles per group: ceil(rows / TILE) in decode_partial.wgsl (TILE rows an
    /// invocation, up to 16, or 8 above width 128: crate::decode::split's invocation_tile_rows),
    /// ceil(rows / ROWS) in decode_workgroup.wgsl.
    pub tiles: u32,
    /// Invocations (decode_partial.wgsl) or workgroups (decode_workgroup.wgsl) that do work.
    pub total: u32,
    /// First group of the chunk.
    pub g0: u32,
    /// Window start of q, in vec4 elements.
    pub q_win: u32,
    /// Window start of k, in vec4 elements.
    pub k_win: u32,
    /// Window start of v, in vec4 elements.
    pub v_win: u32,
    /// Groups in the chunk.
    pub n_groups: u32,
    /// Rows each kv head holds in the K and V buffers (`lk`, or a cache's capacity).
    pub kv_rows: u32,
    /// Padding to a 16-byte offset for `mask`.
    pub pad: [u32; 2],
    /// The mask's windows and strides (at byte offset 80).
    pub mask: MaskParams,
}

/// Parameters of `merge.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct MergeParams {
    /// Rows per group.
    pub rows: u32,
    /// Splits per group.
    pub splits: u32,
    /// Dv / 4.
    pub dv4: u32,
    /// Outputs (vec4) that do work: groups * rows * dv4, each taken by LANES invocations.
    pub total: u32,
    /// Full query length.
    pub lq: u32,
    /// Query heads.
    pub hq: u32,
    /// Key/value heads.
    pub hkv: u32,
    /// Hq / Hkv.
    pub group: u32,
    /// First group of the chunk.
    pub g0: u32,
    /// Window start of out, in vec4 elements.
    pub o_win: u32,
    /// Window start of the LSE, in elements.
    pub lse_win: u32,
    /// Padding to a multiple of 16 bytes.
    pub pad0: u32,
}

/// Parameters of `merge_segment.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SegmentMergeParams {
    /// Rows in this dispatch.
    pub rows: u32,
    /// Output width (the caller's Dv).
    pub dv: u32,
    /// First row of the dispatch.
    pub row0: u32,
    /// Invocations that do work: rows * dv (phase 0) or rows (phase 1).
    pub total: u32,
    /// Window start of both outputs, in elements.
    pub o_win: u32,
    /// Window start of both LSEs, in elements.
    pub lse_win: u32,
    /// 0: update the outputs; 1: then the LSEs.
    pub phase: u32,
    /// Padding to a multiple of 16 bytes.
    pub pad0: u32,
}

/// Parameters of `copy.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CopyParams {
    /// vec4 elements to copy.
    pub n4: u32,
    /// Padding to 16 bytes.
    pub pad: [u32; 3],
}

/// Parameters of `matmul.wgsl`: one piece of C = A B (+ bias), rows `row0 ..` of C, output
/// columns `n0 ..` and reduction indices `k0 ..`, with A and C bound as windows
/// (crate::projection plans the pieces).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct MatmulParams {
    /// Rows of this piece.
    pub m: u32,
    /// Columns of A, rows of B (all of them: the row stride of a plain A).
    pub k: u32,
    /// Columns of B and C (all of them: the row stride of B and of a plain C).
    pub n: u32,
    /// 1 when A is in head-split (B, H, L, HD) layout.
    pub a_split: u32,
    /// 1 when C is in head-split (B, H, L, HD) layout.
    pub c_split: u32,
    /// Sequence length L (head-split layouts).
    pub l: u32,
    /// Heads H (head-split layouts).
    pub h: u32,
    /// Head width HD (head-split layouts).
    pub hd: u32,
    /// 1 when a bias of N values is added (the piece that writes C first).
    pub has_bias: u32,
    /// Column tiles of this piece (32 columns each).
    pub tiles_x: u32,
    /// Workgroups that do work.
    pub total: u32,
    /// First row (b x L + l) of this piece.
    pub row0: u32,
    /// First reduction index (column of A, row of B) of this piece.
    pub k0: u32,
    /// Reduction indices of this piece.
    pub kn: u32,
    /// First output column of this piece.
    pub n0: u32,
    /// Output columns of this piece.
    pub nn: u32,
    /// Element index where the bound window of A starts.
    pub a_win: u32,
    /// Element index where the bound window of C starts.
    pub c_win: u32,
    /// 1 when the piece adds to C (a later range of reduction indices) instead of writing it.
    pub accumulate: u32,
    /// Padding to a multiple of 16 bytes.
    pub pad0: u32,
}

/// Parameters of `rope.wgsl`: one run of rows `row0 ..`, x bound as a window.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct RopeParams {
    /// Invocations that do work: rows of this piece x HD / 2.
    pub total: u32,
    /// Sequence length.
    pub l: u32,
    /// Head width (even).
    pub hd: u32,
    /// 1 for interleaved pairs, 0 for half-split.
    pub interleaved: u32,
    /// First row ((b x H + h) x L + l) of this piece.
    pub row0: u32,
    /// Element index where the bound window of x starts.
    pub x_win: u32,
    /// Pair index (vec2) where the bound window of the (cos, sin) table starts: 0 where
    /// the whole table is bound.
    pub table_win: u32,
    /// Padding to a multiple of 16 bytes.
    pub pad: u32,
}

/// Parameters of `widen_f16.wgsl`, `narrow_f16.wgsl` and their bf16 twins.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ConvertParams {
    /// Elements to convert.
    pub n: u32,
    /// First u32 word (two 16-bit values) of this dispatch.
    pub base: u32,
    /// Padding to 16 bytes.
    pub pad: [u32; 2],
}

/// Mirrors `PadParams` in `shaders/pad_columns.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct PadParams {
    /// Rows of both matrices.
    pub rows: u32,
    /// Row width of the source.
    pub src_cols: u32,
    /// Row width of the destination.
    pub dst_cols: u32,
    /// First destination element of this dispatch, within the destination window.
    pub base: u32,
    /// Element of the source window where its first row starts.
    pub src_start: u32,
    /// Element of the destination window where its first row starts.
    pub dst_start: u32,
    /// Padding to 32 bytes.
    pub pad: [u32; 2],
}
