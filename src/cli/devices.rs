//! `wgpu-attention devices`: every adapter with backend, type, key features, cooperative
//! matrices, limits and device memory, and whether the tensor-core tier runs (its
//! operations probed where it would).

use wgpu_attention::{
    chosen_adapter, describe_adapter, enumerate_adapters, Context, ContextOptions, CoopMode,
    CoopSupport,
};

use super::{exit_code, Failure};

/// Lists the adapters; fails (after the list, with one line saying why) where there are
/// none, or where no context opens on the one `run`, `bench` and the self-check would take:
/// exit 2 for a refused `WGPU_ATTENTION_` variable, as those commands give, else 1.
pub fn run() -> Result<(), Failure> {
    let adapters = enumerate_adapters();
    if adapters.is_empty() {
        return Err(Failure {
            code: 1,
            message: "no adapters found (on Linux without a GPU, install mesa-vulkan-drivers)"
                .to_string(),
        });
    }
    // The mark goes where a context opens (WGPU_ADAPTER_NAME honoured), which is where
    // `run`, `bench` and the self-check run.
    let chosen = chosen_adapter(&adapters);
    // Why no context opens on the marked adapter (a refused environment, a failed device
    // request): `run`, `bench` and the self-check would fail there, so `devices` fails too.
    let mut chosen_fails = None;
    for (i, a) in adapters.iter().enumerate() {
        let info = a.get_info();
        let f = a.features();
        let l = a.limits();
        let mark = if chosen == Some(i) { " (default)" } else { "" };
        println!("[{i}] {}{mark}", describe_adapter(&info));
        println!("    driver: {} {}", info.driver, info.driver_info);
        let has = |feat: wgpu::Features| if f.contains(feat) { "yes" } else { "no" };
        println!(
            "    features: subgroup {} (size {}-{}), shader-f16 {}, timestamp-query {}",
            has(wgpu::Features::SUBGROUP),
            info.subgroup_min_size,
            info.subgroup_max_size,
            has(wgpu::Features::SHADER_F16),
            has(wgpu::Features::TIMESTAMP_QUERY)
        );
        let configs: Vec<String> = a
            .cooperative_matrix_properties()
            .iter()
            .map(|c| {
                format!(
                    "{}x{}x{} {:?}->{:?}",
                    c.m_size, c.n_size, c.k_size, c.ab_type, c.cr_type
                )
            })
            .collect();
        println!(
            "    cooperative matrices: {}",
            if configs.is_empty() {
                "none".to_string()
            } else {
                configs.join(", ")
            }
        );
        println!(
            "    limits: storage binding {} MiB, buffer {} MiB, workgroup memory {} KiB, \
             {} invocations per workgroup, {} workgroups per dimension",
            l.max_storage_buffer_binding_size >> 20,
            l.max_buffer_size >> 20,
            l.max_compute_workgroup_storage_size >> 10,
            l.max_compute_invocations_per_workgroup,
            l.max_compute_workgroups_per_dimension
        );
        // The total lives on the device, not the adapter: open one to ask.
        let options = ContextOptions {
            cooperative_matrix: CoopMode::from_env(),
            ..Default::default()
        };
        match Context::from_adapter(a, &options) {
            Ok(ctx) => {
                println!("    memory: {}", ctx.device_memory());
                let offered = match ctx.coop() {
                    CoopSupport::Hardware { subgroup } => {
                        hardware_lanes(*subgroup, info.subgroup_min_size)
                    }
                    CoopSupport::Emulated => "emulated (WGPU_ATTENTION_COOP=emulate)".into(),
                    CoopSupport::Unavailable(why) => format!("unavailable: {why}"),
                };
                // Where the tier runs, its operations' probe says whether they are what
                // the kernels assume (a small dispatch): the verdict a call would meet.
                let coop = match (ctx.coop(), ctx.check_coop()) {
                    (CoopSupport::Unavailable(_), _) => offered,
                    (_, CoopSupport::Unavailable(why)) => format!("{offered}, but {why}"),
                    _ => format!("{offered}; its operations' probe passed"),
                };
                println!("    fused-coop: {coop}");
            }
            Err(e) => {
                println!("    memory: unknown ({e})");
                if chosen == Some(i) {
                    chosen_fails = Some(e);
                }
            }
        }
    }
    if let Some(e) = chosen_fails {
        return Err(Failure {
            code: exit_code(&e),
            message: format!("no context opens on the default adapter: {e}"),
        });
    }
    if chosen.is_none() {
        let filter = std::env::var("WGPU_ADAPTER_NAME").unwrap_or_default();
        return Err(Failure {
            code: 1,
            message: format!(
                "no adapter's name contains WGPU_ADAPTER_NAME={filter}, so no context opens"
            ),
        });
    }
    Ok(())
}

/// How the tier runs on the hardware: with subgroups of `subgroup` lanes, which where the
/// adapter has a range (from `min`) is its largest, as the tier assumes (RADV runs it so).
fn hardware_lanes(subgroup: u32, min: u32) -> String {
    let range = if min < subgroup {
        format!(" (the largest of the adapter's {min} to {subgroup})")
    } else {
        String::new()
    };
    format!("on the hardware, {subgroup}-lane subgroups{range}")
}

#[cfg(test)]
mod tests {
    use super::hardware_lanes;

    /// One size as it is; a range says the tier takes its largest.
    #[test]
    fn the_tier_line_names_the_largest_of_a_range() {
        assert_eq!(hardware_lanes(32, 32), "on the hardware, 32-lane subgroups");
        assert_eq!(
            hardware_lanes(64, 32),
            "on the hardware, 64-lane subgroups (the largest of the adapter's 32 to 64)"
        );
    }
}
