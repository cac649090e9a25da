//! The fused path: one pass over the keys with an online softmax (FlashAttention-2 style).
//! Memory O(L): no Lq x Lk buffer exists. Four tiers: a tiled one for GPUs (64 x 64 tiles in
//! workgroup memory, register tiles), subgroup broadcast (fastest on CPU adapters such as
//! lavapipe), a portable one sharing 8-key blocks through workgroup memory, and the
//! cooperative-matrix tier (tensor cores, `fused/coop.rs`).
//!
//! On llvmpipe, whose loop limit would cut long rows short (crate::loops), the keys run in
//! several passes ([`key_passes`]), each writing a normalised partial output and its LSE;
//! merge.wgsl combines them, as it does decode's splits. Memory stays O(L) per pass.
//!
//! The subgroup tier's row layout and key ranges are in `fused/subgroup_layout.rs`, its K/V
//! textures in `fused/textures.rs`; why a tier cannot run a problem in `fused/obstacles.rs`,
//! how many passes it takes over the keys in `fused/passes.rs`; the dispatch in
//! `fused/dispatch.rs`; what the planner and the executor ask of each tier in
//! `fused/family.rs`; the tiers, their kernels and the chunk plan here.

pub mod coop;
mod dispatch;
mod family;
pub mod kernels;
mod obstacles;
mod passes;
mod subgroup_layout;
mod textures;

pub use obstacles::{problem_obstacle, weights_obstacle, width_obstacle};
// Read by the crate's own tests only (the `internals` feature), as are the items below
// under the same condition.
#[cfg(feature = "internals")]
pub use obstacles::{tier_obstacle, widths_obstacle};
pub use passes::{key_passes, key_passes_reason, keys_per_pass, passes_per_dispatch};

use crate::profile::DeviceProfile;
pub(crate) use subgroup_layout::chunk_layout;
pub use subgroup_layout::{cpu_adapter_threads, subgroup_array_sizes, SUBGROUP_INVOCATIONS};
#[cfg(feature = "internals")]
pub use subgroup_layout::{
    subgroup_layout, subgroup_rows, subgroup_split_layout, subgroup_splits, SubgroupLayout,
    MIN_SPLIT_KEYS,
};
pub(crate) use textures::kv_texture_bytes;
use textures::kv_textures;
pub use textures::reads_textures;
#[cfg(feature = "internals")]
pub use textures::{kv_textures_available, kv_textures_pay_off, KV_TEXTURE_WIDTH};

use crate::error::Result;
use crate::kernel::Kernel;
use crate::plan::{plan_chunks, Chunk, ChunkCost, DeviceBudget};
use crate::problem::Problem;

/// Query rows one portable-tier workgroup covers (64 invocations x 4 rows).
pub const ROWS_PER_GROUP: usize = 256;

/// Workgroup memory the portable tier declares (two 8-key tiles of up to 128 floats a row).
pub const PORTABLE_WORKGROUP_BYTES: u32 = 2 * 256 * 16;
/// Workgroup memory of the portable tier's wide variant (rows of up to 256 floats), which
/// runs D or Dv above [`MAX_WIDTH`]: 16 KiB, WebGPU's default limit.
pub const PORTABLE_WIDE_WORKGROUP_BYTES: u32 = 2 * 512 * 16;
/// Workgroup memory the tiled tier declares: an 8 KiB staging tile and the 64 x 64 weights
/// (16 KiB), whose first slots also carry the row maxima.
pub const TILED_WORKGROUP_BYTES: u32 = (512 + 1024) * 16;
/// Invocations per workgroup of the tiled tier.
pub const TILED_INVOCATIONS: u32 = 128;
/// Query rows one tiled-tier workgroup covers.
pub const TILED_ROWS_PER_GROUP: usize = 64;

/// Largest D and Dv of the standard variants of the fused tiers and of decode.
pub const MAX_WIDTH: usize = 128;
/// Largest D and Dv of the portable tier and of decode's invocation form through their wide
/// variants, and the largest Dv of the tiled tier's wide variant (the tiled tier takes D up
/// to [`TILED_MAX_D`] and Dv up to [`TILED_WIDER_MAX_DV`]; the subgroup tier:
/// [`SUBGROUP_WIDE_MAX_WIDTH`]).
pub const WIDE_MAX_WIDTH: usize = 256;
/// Largest D and Dv of the subgroup tier, through its wide variant (D4_HI x D4_LO vec4 in
/// src/fused/subgroup_width_640.wgsl): wide enough for multi-head latent attention's
/// absorbed form (D 576, Dv 512).
pub const SUBGROUP_WIDE_MAX_WIDTH: usize = 640;
/// Largest D of the tiled tier: its scores walk D in chunks of 16 through workgroup memory,
/// so no array is sized by D (decode's workgroup form has the same limit, for the same
/// reason).
pub const TILED_MAX_D: usize = 4096;
/// Largest Dv of the tiled tier, through its widest variant (src/fused/tiled_width_512.wgsl),
/// which takes Dv above [`WIDE_MAX_WIDTH`].
pub const TILED_WIDER_MAX_DV: usize = 512;
/// Most query rows per invocation of the subgroup tier's wide variant (MAX_R in
/// src/fused/subgroup_width_640.wgsl).
pub const WIDE_MAX_ROWS: usize = 4;

/// Capability tier of the fused kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// Key/value rows shared by subgroup broadcast (`Features::SUBGROUP`, subgroup size >= 8,
    /// CPU adapters only), in blocks of 8 keys, or 16 where subgroups have 16 lanes.
    Subgroup,
    /// Key/value blocks shared through workgroup memory; needs nothing optional.
    Portable,
    /// 64-row query blocks against 64-key blocks staged in workgroup memory, with register
    /// tiles; needs nothing optional but 24 KiB of workgroup memory. Built for GPUs.
    Tiled,
    /// Q Kᵀ and P V on cooperative matrices (tensor cores) in f16 with f32 accumulators
    /// ([`coop`]): for f16 inputs, or f32 inputs where the caller asks for f16 compute.
    Coop,
}

impl Tier {
    fn kernel(self, dev: &DeviceProfile, p: &Problem) -> Kernel {
        use crate::half_format::HalfFormat::{Bf16, F16};
        if self == Tier::Coop {
            return coop::kernel(dev, p);
        }
        let lanes16 = subgroup_keys(dev.adapter_info()) == 16;
        let textures = reads_textures(dev, p, self);
        let words = !textures && reads_words(dev, self);
        // 16-bit K/V (p.kv_half, where reads_half said yes): the portable and tiled tiers
        // through kv_loads_f16.wgsl / kv_loads_bf16.wgsl; the subgroup tier from textures,
        // f16 through the same kernels as f32 (rgba16float textures), bf16 through
        // kv_loads_texture_bf16.wgsl (rg32uint).
        match (self, p.kv_half) {
            (Tier::Subgroup, Some(Bf16)) => {
                return match (wide(p), lanes16) {
                    (true, true) => kernels::SUBGROUP_WIDE_TEXTURE_16_BF16,
                    (false, true) => kernels::SUBGROUP_TEXTURE_16_BF16,
                    (true, false) => kernels::SUBGROUP_WIDE_TEXTURE_BF16,
                    (false, false) => kernels::SUBGROUP_TEXTURE_BF16,
                }
            }
            (Tier::Portable, Some(F16)) if wide(p) => return kernels::PORTABLE_WIDE_F16,
            (Tier::Portable, Some(F16)) => return kernels::PORTABLE_F16,
            (Tier::Portable, Some(Bf16)) if wide(p) => return kernels::PORTABLE_WIDE_BF16,
            (Tier::Portable, Some(Bf16)) => return kernels::PORTABLE_BF16,
            (Tier::Tiled, Some(F16)) if tiled_wider(p) => return kernels::TILED_WIDER_F16,
            (Tier::Tiled, Some(F16)) if wide(p) => return kernels::TILED_WIDE_F16,
            (Tier::Tiled, Some(F16)) => return kernels::TILED_F16,
            (Tier::Tiled, Some(Bf16)) if tiled_wider(p) => return kernels::TILED_WIDER_BF16,
            (Tier::Tiled, Some(Bf16)) if wide(p) => return kernels::TILED_WIDE_BF16,
            (Tier::Tiled, Some(Bf16)) => return kernels::TILED_BF16,
            _ => {}
        }
        match self {
            Tier::Subgroup if wide(p) && textures && lanes16 => kernels::SUBGROUP_WIDE_TEXTURE_16,
            Tier::Subgroup if textures && lanes16 => kernels::SUBGROUP_TEXTURE_16,
            Tier::Subgroup if wide(p) && textures => kernels::SUBGROUP_WIDE_TEXTURE,
            Tier::Subgroup if textures => kernels::SUBGROUP_TEXTURE,
            Tier::Subgroup if wide(p) && lanes16 => kernels::SUBGROUP_WIDE_16,
            Tier::Subgroup if wide(p) && words => kernels::SUBGROUP_WIDE_U64,
            Tier::Subgroup if wide(p) => kernels::SUBGROUP_WIDE,
            Tier::Subgroup if lanes16 => kernels::SUBGROUP_16,
            Tier::Subgroup if words => kernels::SUBGROUP_U64,
            Tier::Subgroup => kernels::SUBGROUP,
            Tier::Portable if wide(p) => kernels::PORTABLE_WIDE,
            Tier::Portable => kernels::PORTABLE,
            Tier::Tiled if tiled_wider(p) => kernels::TILED_WIDER,
            Tier::Tiled if wide(p) => kernels::TILED_WIDE,
            Tier::Tiled => kernels::TILED,
            Tier::Coop => coop::kernel(dev, p),
        }
    }

    /// Query rows one workgroup of this tier covers for `p` here; on the subgroup tier the fewest
    /// it may cover (R = 2, see `subgroup_layout`); on the cooperative-matrix tier its
    /// variant's ([`coop::Variant`]).
    pub fn rows_per_group(self, dev: &DeviceProfile, p: &Problem) -> usize {
        match self {
            Tier::Subgroup => SUBGROUP_INVOCATIONS * 2,
            Tier::Portable => ROWS_PER_GROUP,
            Tier::Tiled => TILED_ROWS_PER_GROUP,
            Tier::Coop => coop::variant(dev, p).rows,
        }
    }

    /// Path name shown in plans and tables.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Subgroup => "fused-subgroup",
            Tier::Portable => "fused-portable",
            Tier::Tiled => "fused-tiled",
            Tier::Coop => "fused-coop",
        }
    }

    /// The largest D and the largest Dv the tier takes (through its wide variants above
    /// [`MAX_WIDTH`]).
    pub fn max_widths(self) -> (usize, usize) {
        match self {
            Tier::Subgroup => (SUBGROUP_WIDE_MAX_WIDTH, SUBGROUP_WIDE_MAX_WIDTH),
            Tier::Portable => (WIDE_MAX_WIDTH, WIDE_MAX_WIDTH),
            Tier::Tiled => (TILED_MAX_D, TILED_WIDER_MAX_DV),
            Tier::Coop => (coop::COOP_MAX_WIDTH, coop::COOP_MAX_WIDTH),
        }
    }
}

/// Whether `tier` could read K and V as 64-bit words here (shaders/kv_loads_u64.wgsl), where
/// it does not read them from textures ([`reads_textures`] comes first): the
/// subgroup tier where crate::profile::cpu_vectors::kv_words says so (8-lane CPU subgroups); the
/// portable and tiled tiers, built for GPUs, keep vec4 loads.
pub(crate) fn reads_words(dev: &DeviceProfile, tier: Tier) -> bool {
    tier == Tier::Subgroup && crate::profile::cpu_vectors::kv_words(dev)
}

/// Whether `tier` reads 16-bit K and V as they are, rather than from f32 copies widened
/// first (the caller checks the widths need no padding): the portable and tiled tiers
/// always (shaders/kv_loads_f16.wgsl, kv_loads_bf16.wgsl: four values an 8-byte load); the
/// subgroup tier where it reads K and V from textures ([`reads_textures`]), which then hold
/// the 16-bit values (half the bytes to copy; see `textures::kv_texture_format`). Its
/// storage-buffer forms have no 16-bit loads: there the call widens first. The
/// cooperative-matrix tier reads f16 as it is (shaders/kv_loads_f16.wgsl) and bfloat16 from
/// widened copies.
fn reads_half(
    dev: &DeviceProfile,
    p: &Problem,
    tier: Tier,
    format: crate::half_format::HalfFormat,
) -> bool {
    match tier {
        Tier::Portable | Tier::Tiled => true,
        Tier::Coop => format == crate::half_format::HalfFormat::F16,
        Tier::Subgroup => reads_textures(dev, p, tier),
    }
}

/// Query heads per unit of the tiled tier for chunk `c`: a whole GQA group, its rows
/// interleaved in the 64-row blocks (src/fused/fused_tiled.wgsl), where that takes fewer
/// blocks than a head at a time, which is where a head has fewer rows than a block holds or
/// leaves one partly empty (say 8 query positions of a speculative decode, 4 query heads
/// per kv head: one block reading K and V once, instead of four blocks a quarter full each
/// reading them); and only for chunks of whole groups. Otherwise 1.
pub(crate) fn tiled_unit_heads(p: &Problem, c: &Chunk) -> usize {
    tiled_unit_heads_in(p, c, TILED_ROWS_PER_GROUP)
}

/// [`tiled_unit_heads`] for blocks of `block_rows` rows (the cooperative-matrix tier's too).
pub(crate) fn tiled_unit_heads_in(p: &Problem, c: &Chunk, block_rows: usize) -> usize {
    let group = p.dims.hq / p.dims.hkv.max(1);
    let whole_groups = c.bh0.is_multiple_of(group) && c.n_heads.is_multiple_of(group);
    if whole_groups {
        unit_heads_for(group, c.n_heads, c.rows, block_rows)
    } else {
        1
    }
}

/// Query heads per unit for `n_heads` heads (whole GQA groups of `group`) of `rows` rows
/// each, in blocks of `block_rows` rows: the group where that takes fewer blocks
/// ([`row_blocks`]), else 1.
pub(crate) fn unit_heads_for(group: usize, n_heads: usize, rows: usize, block_rows: usize) -> usize {
    let blocks = |units| row_blocks(n_heads, units, rows, block_rows);
    if group > 1 && blocks(group) < blocks(1) {
        group
    } else {
        1
    }
}

/// Blocks of `block_rows` rows (a tiled or cooperative-matrix tier's workgroups) that
/// `n_heads` heads of `rows` rows take, `units` heads' rows interleaved in each unit's blocks.
pub(crate) fn row_blocks(n_heads: usize, units: usize, rows: usize, block_rows: usize) -> usize {
    (n_heads / units) * (units * rows).div_ceil(block_rows)
}

/// Keys per block of the subgroup tier on this adapter: 16 where every subgroup has at least
/// 16 lanes (lavapipe with 512-bit vectors: [`kernels::SUBGROUP_TEXTURE_16`]), so that each lane
/// loads a key row of its own; otherwise 8.
pub fn subgroup_keys(info: &wgpu::AdapterInfo) -> usize {
    if info.subgroup_min_size >= 16 {
        16
    } else {
        8
    }
}

/// Whether D or Dv (padded to multiples of 4, see crate::widths) is above [`MAX_WIDTH`], so
/// only the tiers' wide variants can run the problem.
pub fn wide(p: &Problem) -> bool {
    crate::widths::padded(p.dims.d) > MAX_WIDTH || crate::widths::padded(p.dims.dv) > MAX_WIDTH
}

/// Whether the tiled tier runs `p` on its widest variant (kernels::TILED_WIDER): Dv
/// (padded to a multiple of 4) above [`WIDE_MAX_WIDTH`]. Its wide variant takes the other
/// problems with D or Dv above [`MAX_WIDTH`], D above 256 included.
pub fn tiled_wider(p: &Problem) -> bool {
    crate::widths::padded(p.dims.dv) > WIDE_MAX_WIDTH
}

/// The chunks this path runs in, planned against the device's limits. In one key pass the
/// fused path needs no scratch beside its outputs; in several, each chunk's scratch is the
/// partial outputs of all passes (their LSEs take `scratch / Dv` more).
fn plan(dev: &DeviceProfile, p: &Problem, tier: Tier) -> Result<Vec<Chunk>> {
    let budget = DeviceBudget::from_limits(&dev.limits());
    let passes = key_passes(dev, p, tier);
    let cost = |n: usize, rows: usize| ChunkCost {
        scratch_bytes: if passes > 1 {
            (n * passes * rows * p.dims.dv * 4) as u64
        } else {
            0
        },
        // With passes, the merge's invocations (one per output vec4) too, and the passes a
        // dispatch runs side by side.
        max_groups: if passes > 1 {
            (n * rows.div_ceil(tier.rows_per_group(dev, p)) * passes_per_dispatch(tier, passes))
                .max((n * rows * p.dims.dv / 4).div_ceil(64))
        } else {
            n * rows.div_ceil(tier.rows_per_group(dev, p))
        } as u64,
    };
    plan_chunks(p, &budget, &cost)
}

/// Bytes of the largest chunk's partial outputs and of their LSEs, (0, 0) in one pass (both
/// buffers are reused by every chunk).
fn partial_bytes(p: &Problem, chunks: &[Chunk]) -> (u64, u64) {
    let outputs = chunks.iter().map(|c| c.scratch_bytes).max().unwrap_or(0);
    if outputs == 0 {
        return (0, 0);
    }
    (outputs, (outputs / p.dims.dv as u64).max(4))
}

/// Scratch bytes the path allocates beside its outputs: the partial outputs of key passes
/// and their LSEs (none in one pass), and the K/V textures where the kernel reads them
/// (`textures`: [`reads_textures`]).
fn scratch_bytes(p: &Problem, chunks: &[Chunk], textures: bool) -> u64 {
    let (outputs, lses) = partial_bytes(p, chunks);
    let textures = if textures {
        kv_texture_bytes(p, chunks)
    } else {
        0
    };
    outputs + lses + textures
}
