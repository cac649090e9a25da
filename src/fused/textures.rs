//! K and V copied into textures for the subgroup tier (shaders/kv_loads_texture.wgsl): on
//! llvmpipe a texel fetch is one 16-byte load per lane, where a storage-buffer load at
//! lane-dependent addresses is a loop over the lanes. What decides whether a call takes
//! them, what they cost in device memory, and the copies that fill them.

use super::{Problem, Tier};
use crate::plan::Chunk;
use crate::profile::DeviceProfile;
use crate::family::DeviceInputs;

/// Texels per row of the textures that hold K and V for the subgroup tier
/// (shaders/kv_loads_texture.wgsl's TEXTURE_WIDTH): 64 KiB rows (32 KiB for 16-bit K/V),
/// which `copy_buffer_to_texture` takes (rows must be multiples of 256 bytes).
pub const KV_TEXTURE_WIDTH: u32 = 4096;

/// Whether `tier` reads K and V from textures for `p` here (shaders/kv_loads_texture.wgsl):
/// where [`kv_textures_available`] and [`kv_textures_pay_off`]. llvmpipe loads a storage
/// buffer at lane-dependent addresses one lane and one component at a time; a texel fetch
/// is one 16-byte load per lane. On an Intel Xeon at 512 bits that made B1 H8 L1024 D64 run
/// 108.2 against 93.9 GFLOP/s, copies included (docs/measurements.md). The price: the K/V
/// windows are copied into the textures every call (their device memory is counted in the
/// call's estimate, see [`crate::MemoryEstimate`]).
pub fn reads_textures(dev: &DeviceProfile, p: &Problem, tier: Tier) -> bool {
    kv_textures_available(dev, tier) && kv_textures_pay_off(p)
}

/// Whether `tier` can read K and V from textures on this context: the subgroup tier (which
/// runs on CPU adapters only, see [`tier_obstacle`](super::obstacles::tier_obstacle)), where a texture row of
/// [`KV_TEXTURE_WIDTH`] texels fits the limits and every window a binding can hold fits the
/// texture's rows. At 8 lanes the textures replace the 64-bit loads too (+9 % at B1 H8
/// L1024 D64, +16 % at D 256 on the Xeon; docs/measurements.md). Asking for a context with
/// `max_texture_dimension_2d` below [`KV_TEXTURE_WIDTH`] turns textures off, which is how
/// the tests run the storage-buffer forms as well.
pub fn kv_textures_available(dev: &DeviceProfile, tier: Tier) -> bool {
    let limits = dev.limits();
    let rows_needed = u64::from(kv_texture_rows(limits.max_storage_buffer_binding_size, 16));
    tier == Tier::Subgroup
        && limits.max_texture_dimension_2d >= KV_TEXTURE_WIDTH
        && rows_needed <= u64::from(limits.max_texture_dimension_2d)
}

/// Whether copying all of K and V into textures pays for `p`: unless a causal rule hides
/// more than half of the keys from every row (top-left with Lq < Lk / 2), which the kernel
/// then never reads. There the copy cost up to four times the kernel's own time (B1 H8
/// Lq8 Lk4096 D64 top-left: 0.1 against 0.4 GFLOP/s); without a causal rule the copy paid
/// or broke even from 8 query rows per kv head (docs/measurements.md).
pub fn kv_textures_pay_off(p: &Problem) -> bool {
    let lk = p.dims.lk as i64;
    let seen = match p.causal_offset {
        Some(o) => (p.dims.lq as i64 + o).clamp(0, lk),
        None => lk,
    };
    2 * seen >= lk
}

/// Rows of a K/V texture are allocated in units of this many: llvmpipe lays out 2D textures
/// in blocks of 4 rows (a 4096 x 1 rgba32float texture takes 256 KiB), so whole units make
/// the memory estimate exact there and cost other drivers at most 3 rows.
const KV_TEXTURE_ROW_UNIT: u64 = 4;

/// The format of the K/V textures for `p` and the bytes of one texel (four values):
/// rgba32float; for f16 K and V (p.kv_half, see [`super::reads_half`]) rgba16float, which the
/// fetch widens; for bfloat16, which has no texture format, rg32uint holding the packed
/// words as they are (shaders/kv_loads_texture_bf16.wgsl widens them).
fn kv_texture_format(p: &Problem) -> (wgpu::TextureFormat, u64) {
    use crate::half_format::HalfFormat::{Bf16, F16};
    match p.kv_half {
        Some(F16) => (wgpu::TextureFormat::Rgba16Float, 8),
        Some(Bf16) => (wgpu::TextureFormat::Rg32Uint, 8),
        None => (wgpu::TextureFormat::Rgba32Float, 16),
    }
}

/// Texture rows that hold a window of `bytes` (vec4 elements, `texel` bytes each), in whole
/// units of [`KV_TEXTURE_ROW_UNIT`].
fn kv_texture_rows(bytes: u64, texel: u64) -> u32 {
    let rows = bytes
        .div_ceil(texel * u64::from(KV_TEXTURE_WIDTH))
        .max(1)
        .next_multiple_of(KV_TEXTURE_ROW_UNIT);
    u32::try_from(rows).unwrap_or(u32::MAX)
}

/// Device bytes of the K and V textures of every chunk (see [`reads_textures`]): whole rows
/// of [`KV_TEXTURE_WIDTH`] texels (16 bytes, or 8 for 16-bit K and V), in units of
/// [`KV_TEXTURE_ROW_UNIT`] rows, all alive until the call's submission ends.
pub(crate) fn kv_texture_bytes(p: &Problem, chunks: &[Chunk]) -> u64 {
    let (_, texel) = kv_texture_format(p);
    let row_bytes = texel * u64::from(KV_TEXTURE_WIDTH);
    chunks
        .iter()
        .map(|c| {
            (u64::from(kv_texture_rows(c.k.size, texel))
                + u64::from(kv_texture_rows(c.v.size, texel)))
                * row_bytes
        })
        .sum()
}

/// Textures holding a chunk's K and V windows, and the copies that fill them, encoded into
/// `encoder` (before the pass that reads them): whole rows in one copy, the last partial
/// row in another. Texel i holds vec4 element i of the window, in the format of
/// [`kv_texture_format`] (the windows of 16-bit K and V are already halved).
pub(super) fn kv_textures(
    device: &wgpu::Device,
    encoder: &mut wgpu::CommandEncoder,
    p: &Problem,
    inputs: &DeviceInputs<'_>,
    c: &Chunk,
) -> (wgpu::Texture, wgpu::Texture) {
    let (format, texel) = kv_texture_format(p);
    let mut texture = |label, buffer: &wgpu::Buffer, window: &crate::plan::Window| {
        let texels = window.size / texel;
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some(label),
            size: wgpu::Extent3d {
                width: KV_TEXTURE_WIDTH,
                height: kv_texture_rows(window.size, texel),
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format,
            usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        let width = u64::from(KV_TEXTURE_WIDTH);
        let (full_rows, rest) = (texels / width, texels % width);
        let copy = |encoder: &mut wgpu::CommandEncoder, offset: u64, row: u64, size| {
            encoder.copy_buffer_to_texture(
                wgpu::TexelCopyBufferInfo {
                    buffer,
                    layout: wgpu::TexelCopyBufferLayout {
                        offset,
                        bytes_per_row: Some((texel * width) as u32),
                        rows_per_image: None,
                    },
                },
                wgpu::TexelCopyTextureInfo {
                    texture: &texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d {
                        x: 0,
                        y: row as u32,
                        z: 0,
                    },
                    aspect: wgpu::TextureAspect::All,
                },
                size,
            );
        };
        if full_rows > 0 {
            let size = wgpu::Extent3d {
                width: KV_TEXTURE_WIDTH,
                height: full_rows as u32,
                depth_or_array_layers: 1,
            };
            copy(encoder, window.offset, 0, size);
        }
        if rest > 0 {
            let size = wgpu::Extent3d {
                width: rest as u32,
                height: 1,
                depth_or_array_layers: 1,
            };
            copy(
                encoder,
                window.offset + full_rows * texel * width,
                full_rows,
                size,
            );
        }
        texture
    };
    (
        texture("k texture", inputs.k, &c.k),
        texture("v texture", inputs.v, &c.v),
    )
}
