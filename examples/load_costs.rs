//! Developer probe: what one lane-dependent load of four floats costs on this adapter, by the
//! kind of binding it comes from. Every invocation sums a run of vec4 at its own addresses
//! (as a lane of the subgroup tier or of decode reads its own key row) through five
//! bindings of the same data: a storage buffer read as `vec4<f32>`, the same read as two
//! 64-bit words (`shaders/kv_loads_u64.wgsl`'s form; needs `Features::SHADER_INT64`) and as
//! four (two vec4 a load), a 64 KiB uniform buffer, and an `rgba32float` texture read with
//! `textureLoad`. Each sum is checked against the CPU's before its time counts.
//!
//! Why: llvmpipe (Mesa 22.3) turns a storage-buffer load at lane-dependent addresses into a
//! loop over the lanes, one component at a time, a uniform-buffer load into a hardware
//! gather, and a texel fetch into one 16-byte load per lane and a transpose. Which is
//! cheapest decides how the kernels should read K and V (docs/measurements.md: what this probe
//! found on three CPUs).
//!
//! Run: `cargo run --release --example load_costs` (prints the best of 30 submissions per
//! binding, wall clock: ms, and CPU cycles per lane and vec4 at the clock given by
//! `--ghz G`, 2.6 by default, over all cores `--cores N`, 2 by default). Set
//! `LP_NATIVE_VECTOR_WIDTH=512` for 16-lane vectors on AVX-512 CPUs.

use std::time::Instant;
use wgpu::util::DeviceExt;

/// vec4 elements read in all: 32 MiB.
const READS: u32 = 2 * 1024 * 1024;
/// Consecutive vec4 read by one invocation.
const RUN: u32 = 512;
/// The data: 4096 vec4 (64 KiB, the largest uniform binding most adapters allow), which
/// also keeps every read in the CPU's caches, so that the probe times loads, not DRAM.
const ELEMENTS: u32 = 4096;
/// Texture width in texels (the texture is ELEMENTS / WIDTH rows).
const WIDTH: u32 = 1024;
const SUBMISSIONS: usize = 30;

/// The loop body of every binding but the 4 x 64-bit one: two vec4, one `load` each.
const PAIR_OF_LOADS: &str = "a = a + load((base + i) & MASK);\n\
                             b = b + load((base + i + 1u) & MASK);";

/// A probe whose `load(i)` returns vec4 `i` of `binding` (the function's body given).
fn shader(binding: &str, load: &str) -> String {
    shader_with(
        binding,
        &format!("fn load(i: u32) -> vec4<f32> {{ {load} }}"),
        PAIR_OF_LOADS,
    )
}

/// Every invocation sums vec4 `base .. base + RUN` of `binding` (wrapped by MASK) into `a` and
/// `b`: `body` reads vec4 `i` and `i + 1` from `base`, with the `helpers` it calls.
fn shader_with(binding: &str, helpers: &str, body: &str) -> String {
    format!(
        "const RUN: u32 = {RUN}u;\nconst MASK: u32 = {mask}u;\nconst WIDTH: u32 = {WIDTH}u;\n\
         {binding}\n\
         @group(0) @binding(1) var<storage, read_write> sums: array<vec4<f32>>;\n\
         {helpers}\n\
         @compute @workgroup_size(64)\n\
         fn main(@builtin(global_invocation_id) g: vec3<u32>) {{\n\
             let base = g.x * RUN;\n\
             var a = vec4<f32>(0.0);\n\
             var b = vec4<f32>(0.0);\n\
             for (var i = 0u; i < RUN; i = i + 2u) {{\n\
                 {body}\n\
             }}\n\
             sums[g.x] = a + b;\n\
         }}\n",
        mask = ELEMENTS - 1,
    )
}

fn arg(name: &str, default: f64) -> f64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let (ghz, cores) = (arg("--ghz", 2.6), arg("--cores", 2.0));
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends = wgpu::Backends::PRIMARY;
    let instance = wgpu::Instance::new(desc);
    let adapter =
        pollster::block_on(instance.request_adapter(&Default::default())).expect("no adapter");
    let int64 = adapter.features().contains(wgpu::Features::SHADER_INT64);
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        required_features: if int64 {
            wgpu::Features::SHADER_INT64
        } else {
            wgpu::Features::empty()
        },
        ..Default::default()
    }))
    .expect("no device");
    println!("{}", adapter.get_info().name);

    // Small integers, so that every sum is exact in f32 and must match the CPU's.
    let data: Vec<f32> = (0..ELEMENTS * 4).map(|i| (i % 7) as f32).collect();
    let bytes: &[u8] = bytemuck::cast_slice(&data);
    let storage = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("storage"),
        contents: bytes,
        usage: wgpu::BufferUsages::STORAGE,
    });
    let uniform = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("uniform"),
        contents: bytes,
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let texture = device.create_texture_with_data(
        &queue,
        &wgpu::TextureDescriptor {
            label: Some("texture"),
            size: wgpu::Extent3d {
                width: WIDTH,
                height: ELEMENTS / WIDTH,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba32Float,
            usage: wgpu::TextureUsages::TEXTURE_BINDING,
            view_formats: &[],
        },
        Default::default(),
        bytes,
    );
    let view = texture.create_view(&Default::default());
    let invocations = READS / RUN;
    let sums_size = u64::from(invocations) * 16;
    let sums = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("sums"),
        size: sums_size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: sums_size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });

    // What every invocation's sum must be.
    let expected: Vec<[f32; 4]> = (0..invocations)
        .map(|g| {
            let mut s = [0.0f32; 4];
            for i in 0..RUN {
                let e = ((g * RUN + i) & (ELEMENTS - 1)) as usize;
                for (c, sc) in s.iter_mut().enumerate() {
                    *sc += data[e * 4 + c];
                }
            }
            s
        })
        .collect();

    let storage_vec4 = "@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;";
    let storage_words = "@group(0) @binding(0) var<storage, read> src: array<vec2<u64>>;";
    let uniform_vec4 =
        format!("@group(0) @binding(0) var<uniform> src: array<vec4<f32>, {ELEMENTS}>;");
    let texture_2d = "@group(0) @binding(0) var src: texture_2d<f32>;";
    let mut kinds: Vec<(&str, String, wgpu::BindingResource)> = vec![(
        "storage vec4<f32>",
        shader(storage_vec4, "return src[i];"),
        storage.as_entire_binding(),
    )];
    if int64 {
        kinds.push((
            "storage 64-bit words",
            shader(
                storage_words,
                "let w = src[i]; return bitcast<vec4<f32>>(vec4<u32>(u32(w.x), \
                 u32(w.x >> 32u), u32(w.y), u32(w.y >> 32u)));",
            ),
            storage.as_entire_binding(),
        ));
        // Two vec4 a load: the per-lane loop then moves 32 bytes a lane where the others move 16.
        kinds.push((
            "storage 4 x 64-bit",
            shader_with(
                "@group(0) @binding(0) var<storage, read> src: array<vec4<u64>>;",
                "fn floats(a: u64, b: u64) -> vec4<f32> { return bitcast<vec4<f32>>(\
                 vec4<u32>(u32(a), u32(a >> 32u), u32(b), u32(b >> 32u))); }",
                "let w = src[((base + i) & MASK) / 2u];\n\
                 a = a + floats(w.x, w.y);\n\
                 b = b + floats(w.z, w.w);",
            ),
            storage.as_entire_binding(),
        ));
    }
    kinds.push((
        "uniform vec4<f32>",
        shader(&uniform_vec4, "return src[i];"),
        uniform.as_entire_binding(),
    ));
    kinds.push((
        "texture rgba32float",
        shader(
            texture_2d,
            "return textureLoad(src, vec2<u32>(i % WIDTH, i / WIDTH), 0);",
        ),
        wgpu::BindingResource::TextureView(&view),
    ));

    println!(
        "{:22} {:>8} {:>22}",
        "binding", "best ms", "cycles per lane-vec4"
    );
    for (name, source, resource) in kinds {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(name),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(name),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(name),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource,
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: sums.as_entire_binding(),
                },
            ],
        });
        let mut best = f64::INFINITY;
        for submission in 0..SUBMISSIONS {
            let mut encoder = device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                pass.dispatch_workgroups(invocations / 64, 1, 1);
            }
            let last = submission + 1 == SUBMISSIONS;
            if last {
                encoder.copy_buffer_to_buffer(&sums, 0, &readback, 0, sums_size);
            }
            let start = Instant::now();
            queue.submit([encoder.finish()]);
            device
                .poll(wgpu::PollType::wait_indefinitely())
                .expect("poll");
            best = best.min(start.elapsed().as_secs_f64());
        }
        readback
            .slice(..)
            .map_async(wgpu::MapMode::Read, |r| r.expect("map"));
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .expect("poll");
        let got: Vec<[f32; 4]> = {
            let view = readback.slice(..).get_mapped_range().expect("mapped range");
            bytemuck::cast_slice(&view).to_vec()
        };
        readback.unmap();
        assert_eq!(got, expected, "{name}: sums differ from the CPU's");
        let cycles = best * ghz * 1e9 * cores / f64::from(READS);
        println!("{name:22} {:8.2} {cycles:22.1}", best * 1e3);
    }
}
