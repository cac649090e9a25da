//! The tier's tile variants: the sizes each compiles with, the workgroup memory it
//! declares, which problems it takes, and its kernels (src/fused/coop/coop_tile_*.wgsl).

use super::kernels;
use super::COOP_INVOCATIONS;
use crate::kernel::Kernel;
use crate::problem::Problem;

/// Subgroups of `lanes` invocations in a workgroup of the tier (NSG).
fn subgroups(lanes: u32) -> u32 {
    (COOP_INVOCATIONS / lanes.max(1)).max(1)
}

/// How a pipeline of a variant lays out its work where that changes the sizes written into
/// its source ([`Variant::array_sizes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Whether the weights go into P V as two f16 parts (SPLIT_P;
    /// crate::fused::coop::split_weights), which sizes the array of their low parts.
    pub split: bool,
    /// The kernel's SCORE_ROWS (crate::fused::coop::score_rows): 2 where each subgroup's
    /// score blocks may span two rows of blocks, which doubles its rows of Q in registers;
    /// else 1.
    pub score_rows: u32,
}

/// Tile sizes of a compiled variant: query rows a workgroup and the largest D and Dv
/// (`src/fused/coop/coop_tile_<rows>x<width>.wgsl`), and keys a block (32, or 64 written
/// into the pipeline's source).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    /// Query rows a workgroup (BR).
    pub rows: usize,
    /// Largest D and Dv (WIDTH).
    pub width: usize,
    /// Keys a block (BC).
    pub keys: usize,
}

impl Variant {
    /// Every variant, in the order the tier prefers them: blocks of 64 rows at widths 64
    /// and 128 first, the variants GPUs take (with subgroups of 32, 64 x 128 takes 24.3 KiB
    /// of workgroup memory: NVIDIA's 48 KiB, Apple's and lavapipe's 32); then for less
    /// workgroup memory the most rows and the narrowest width, down to 16 x 128 (15.4 KiB)
    /// within WebGPU's default 16 KiB (tests/suite/coop.rs,
    /// coop_fits_less_workgroup_memory); then D or Dv from 129 to 256 (heads of 256, as
    /// Gemma's) in blocks of 32 rows (25.2 KiB, 27.6 with the weights in two parts). Last,
    /// blocks of 64 keys, which halve the barriers
    /// and softmax rounds a key and need more memory (64 x 128 x 64: 44.9 KiB): never the
    /// first that fits, so only timed (`WGPU_ATTENTION_COOP_VARIANT`) until a GPU run says
    /// whether they are faster.
    pub const ALL: [Variant; 11] = [
        Variant::new(64, 64, 32),
        Variant::new(64, 128, 32),
        Variant::new(64, 32, 32),
        Variant::new(32, 64, 32),
        Variant::new(32, 128, 32),
        Variant::new(16, 64, 32),
        Variant::new(16, 128, 32),
        Variant::new(32, 256, 32),
        Variant::new(64, 64, 64),
        Variant::new(64, 128, 64),
        Variant::new(32, 128, 64),
    ];

    pub(super) const fn new(rows: usize, width: usize, keys: usize) -> Variant {
        Variant { rows, width, keys }
    }

    /// Its name, as `WGPU_ATTENTION_COOP_VARIANT` takes it: `<rows>x<width>`, and
    /// `k<keys>` after it where the blocks are not of 32 keys (`64x128k64`).
    pub fn name(self) -> String {
        match self.keys {
            32 => format!("{}x{}", self.rows, self.width),
            keys => format!("{}x{}k{keys}", self.rows, self.width),
        }
    }

    /// Workgroup memory the variant declares with subgroups of `lanes`, bytes: the arrays
    /// of src/fused/coop/fused_coop.wgsl (a block of K or V, and the weights, which also
    /// stage Q, in f16; with `split` ([`super::split_weights`]) the weights' low parts,
    /// else a row of them; the scores, which are also the subgroups' scratch of 256 values
    /// each, in f32; a factor a row, three partials an invocation and a flag).
    pub fn workgroup_bytes(self, lanes: u32, split: bool) -> u32 {
        let (br, bc, w) = (self.rows as u32, self.keys as u32, self.width as u32);
        let low_rows = if split { br } else { 1 };
        let halves = bc * (w + 8) + (br + low_rows) * (bc + 8);
        let scores = (br * (bc + 4)).max(subgroups(lanes) * 256);
        let floats = scores + br + 3 * COOP_INVOCATIONS + 1;
        halves * 2 + floats * 4
    }

    /// Output blocks (16 x 16) each subgroup holds in its accumulators for `dv` with
    /// subgroups of `lanes` (`nb` in src/fused/coop/fused_coop.wgsl; its arrays are sized by
    /// NACC).
    pub fn accumulators(self, dv: usize, lanes: u32) -> usize {
        (self.rows / 16) * (self.output_width(dv, lanes) / 16) / subgroups(lanes) as usize
    }

    /// Rows of 16x16 score blocks each subgroup computes with subgroups of `lanes` and the
    /// kernel's SCORE_ROWS `asked` (s_rows in src/fused/coop/fused_coop.wgsl): whole rows
    /// where each subgroup's share is at least a row of blocks; else, with `asked` 2, two
    /// where each subgroup's run of a row would be an even count of blocks and the rows of
    /// blocks are even (64 x 128: two rows of one block, not one row of two); else one.
    pub fn score_rows(self, lanes: u32, asked: u32) -> usize {
        let across = self.keys / 16;
        let each = ((self.rows / 16) * across / subgroups(lanes) as usize).max(1);
        let rows = (each / across).max(1);
        let pair =
            asked == 2 && rows == 1 && each.is_multiple_of(2) && (self.rows / 16).is_multiple_of(2);
        if pair {
            2
        } else {
            rows
        }
    }

    /// The sizes written into the kernel's source for `d` and `dv` with subgroups of
    /// `lanes` (crate::kernel::PipelineKey::sizes): BC, the keys a block (the tile file
    /// says 32); SLOTS, the subgroups, whose scratch ss holds; NACC, the output blocks each
    /// holds in its accumulators; NQ, the 16x16 blocks of Q each holds
    /// ([`Variant::score_rows`] of them a block of 16 columns); LANE_ELEMS, the elements of
    /// a block each lane holds where the operations are emulated; SPLIT_P, the layout's
    /// `split`. All follow from the variant, the pipeline's D, DV and SG, and `layout`.
    pub fn array_sizes(
        self,
        d: usize,
        dv: usize,
        lanes: u32,
        layout: Layout,
    ) -> [(&'static str, u32); 6] {
        let q_rows = self.score_rows(lanes, layout.score_rows);
        [
            ("BC", self.keys as u32),
            ("SLOTS", subgroups(lanes)),
            ("NACC", self.accumulators(dv, lanes).max(1) as u32),
            ("NQ", (q_rows * d.div_ceil(16)).max(1) as u32),
            ("LANE_ELEMS", (256 / lanes.clamp(16, 256)).max(1)),
            ("SPLIT_P", u32::from(layout.split)),
        ]
    }

    /// Columns its output blocks cover for `dv` with subgroups of `lanes` (DV16 in
    /// src/fused/coop/fused_coop.wgsl): Dv rounded up so that the 16x16 output blocks
    /// divide evenly among the 128 / `lanes` subgroups, as an output block must have one
    /// subgroup.
    pub fn output_width(self, dv: usize, lanes: u32) -> usize {
        let step = 16 * (subgroups(lanes) as usize / (self.rows / 16)).max(1);
        dv.div_ceil(step) * step
    }

    /// Whether the variant takes `p` with subgroups of `lanes`: D and Dv (padded to
    /// multiples of 4), and the columns its output blocks cover, within its width.
    pub fn takes(self, p: &Problem, lanes: u32) -> bool {
        let widest = crate::widths::padded(p.dims.d).max(crate::widths::padded(p.dims.dv));
        widest <= self.width && self.output_width(p.dims.dv, lanes) <= self.width
    }

    /// The variant for `p` on a device with `workgroup_bytes` of workgroup memory and
    /// subgroups of `lanes`: the first of [`Variant::ALL`] that takes it
    /// ([`Variant::takes`]) and whose arrays fit with the weights in one part
    /// ([`super::split_weights`] then adds their low parts where those fit too).
    pub fn for_problem(p: &Problem, workgroup_bytes: u32, lanes: u32) -> Option<Variant> {
        Variant::ALL
            .into_iter()
            .find(|v| v.takes(p, lanes) && v.workgroup_bytes(lanes, false) <= workgroup_bytes)
    }

    /// The kernel of this variant: f16 K/V loads or f32, hardware or emulated operations.
    pub fn kernel(self, f16: bool, emulated: bool) -> Kernel {
        use kernels::*;
        let [hw, emu, hw16, emu16] = match (self.rows, self.width) {
            (64, 128) => [
                COOP_64X128,
                COOP_64X128_EMULATED,
                COOP_64X128_F16,
                COOP_64X128_F16_EMULATED,
            ],
            (64, 64) => [
                COOP_64X64,
                COOP_64X64_EMULATED,
                COOP_64X64_F16,
                COOP_64X64_F16_EMULATED,
            ],
            (32, 128) => [
                COOP_32X128,
                COOP_32X128_EMULATED,
                COOP_32X128_F16,
                COOP_32X128_F16_EMULATED,
            ],
            (64, 32) => [
                COOP_64X32,
                COOP_64X32_EMULATED,
                COOP_64X32_F16,
                COOP_64X32_F16_EMULATED,
            ],
            (32, 64) => [
                COOP_32X64,
                COOP_32X64_EMULATED,
                COOP_32X64_F16,
                COOP_32X64_F16_EMULATED,
            ],
            (32, 256) => [
                COOP_32X256,
                COOP_32X256_EMULATED,
                COOP_32X256_F16,
                COOP_32X256_F16_EMULATED,
            ],
            (16, 64) => [
                COOP_16X64,
                COOP_16X64_EMULATED,
                COOP_16X64_F16,
                COOP_16X64_F16_EMULATED,
            ],
            _ => [
                COOP_16X128,
                COOP_16X128_EMULATED,
                COOP_16X128_F16,
                COOP_16X128_F16_EMULATED,
            ],
        };
        match (f16, emulated) {
            (false, false) => hw,
            (false, true) => emu,
            (true, false) => hw16,
            (true, true) => emu16,
        }
    }
}
