//! The environment variables that change what the library plans or how it builds its
//! kernels: switches for testing and timing (CI's runs planned as on a GPU, the device
//! script's rows of each kernel choice beside the default), never needed in use. Each is
//! declared here once, with the values it takes; the modules that read one say what it
//! does.
//!
//! A context refuses to open ([`Error::Environment`]) where one of them holds a value it
//! does not take, or where a variable begins with [`PREFIX`] and is none of them. Why:
//! each reader used to fall back to its default on anything it did not know, so a
//! misspelt name or value (`WGPU_ATTENTION_COOP=emulated-tier`,
//! `WGPU_ATTENTION_INVOCATION_ORDER=reverse`) left a test pass or a timing row running the
//! default while its label named something else, and nothing said so. An empty value is
//! as if the variable were unset: the default.

use crate::error::{Error, Result};
use std::ffi::OsString;

/// What the crate's variables' names begin with.
pub(crate) const PREFIX: &str = "WGPU_ATTENTION_";

/// One variable and the values it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Switch {
    /// The variable's name.
    pub(crate) name: &'static str,
    /// The values it takes besides the empty one; empty for any (a file's path).
    pub(crate) takes: &'static [&'static str],
}

impl Switch {
    /// Its value, where set to one it takes; `None` where unset or empty (the default). A
    /// value it does not take reads as `None` too, but no context opens then
    /// ([`check_environment`]), so only a profile made without a context (the recorded
    /// ones) can meet one.
    pub(crate) fn value(self) -> Option<String> {
        let value = std::env::var(self.name).ok()?;
        self.accepts(&value).then_some(value)
    }

    /// Whether it is set to `value`.
    pub(crate) fn is(self, value: &str) -> bool {
        self.value().as_deref() == Some(value)
    }

    /// Its value as a number, where it is set to one.
    pub(crate) fn number(self) -> Option<u32> {
        self.value()?.parse().ok()
    }

    /// Whether `value` is one it takes (not the empty one, which means unset).
    fn accepts(self, value: &str) -> bool {
        !value.is_empty() && (self.takes.is_empty() || self.takes.contains(&value))
    }
}

const OFF_ON: &[&str] = &["0", "1"];

/// The tensor-core tier: on the hardware (the default), emulated in scalar WGSL, or off
/// (crate::profile::CoopMode::from_env).
pub(crate) const COOP: Switch = Switch {
    name: "WGPU_ATTENTION_COOP",
    takes: &["hardware", "emulate", "emulated", "off"],
};
/// `1`: the emulated tier's pipelines checked on the device as hardware ones are
/// (crate::attention::coop_check).
pub(crate) const COOP_CHECK: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_CHECK",
    takes: OFF_ON,
};
/// `0`: the tier's checks wait for the device no time at all, so that each is taken for a
/// hang (for the tests of what follows one); `none`: they wait as long as the work takes
/// (crate::attention::coop_check's `check_wait`).
pub(crate) const COOP_CHECK_WAIT: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_CHECK_WAIT",
    takes: &["0", "none"],
};
/// The lanes of the emulated tier's subgroups (crate::fused::coop::subgroup_lanes).
pub(crate) const COOP_LANES: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_LANES",
    takes: &["16", "32", "64", "128"],
};
/// The lanes of the subgroups that the emulated tier's operations run on, where fewer than
/// the kernel's (crate::fused::coop::emulated_lane_elems): a driver that runs the tier on
/// subgroups smaller than it assumes.
pub(crate) const COOP_DRIVER_LANES: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_DRIVER_LANES",
    takes: &["16", "32", "64"],
};
/// The tier's tile variant, by name (crate::fused::coop::Variant::ALL; a unit test there
/// holds the two lists equal).
pub(crate) const COOP_VARIANT: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_VARIANT",
    takes: &[
        "64x64",
        "64x128",
        "64x32",
        "32x64",
        "32x128",
        "16x64",
        "16x128",
        "32x256",
        "64x64k64",
        "64x128k64",
        "32x128k64",
    ],
};
/// `1`: the tier's K/V prefetch (crate::fused::coop::prefetch).
pub(crate) const COOP_PREFETCH: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_PREFETCH",
    takes: OFF_ON,
};
/// The rows of output blocks a subgroup's tile spans (crate::fused::coop::output_rows).
pub(crate) const COOP_OUT_ROWS: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_OUT_ROWS",
    takes: &["1", "2"],
};
/// The rows of score blocks a subgroup's tile spans (crate::fused::coop::score_rows).
pub(crate) const COOP_SCORE_ROWS: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_SCORE_ROWS",
    takes: &["1", "2"],
};
/// `0`: the tier's weights in one f16 part (crate::fused::coop::split_weights).
pub(crate) const COOP_SPLIT_P: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_SPLIT_P",
    takes: OFF_ON,
};
/// The key ranges the tier's workgroups split each row's keys into, side by side in one
/// dispatch and merged (crate::fused::coop::key_splits).
pub(crate) const COOP_KEY_SPLITS: Switch = Switch {
    name: "WGPU_ATTENTION_COOP_KEY_SPLITS",
    takes: &["1", "2", "3", "4", "5", "6", "7", "8"],
};
/// The loads decode's workgroup form issues together (crate::decode::load_batch; up to
/// crate::decode::MAX_LOAD_BATCH).
pub(crate) const DECODE_BATCH: Switch = Switch {
    name: "WGPU_ATTENTION_DECODE_BATCH",
    takes: &[
        "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
    ],
};
/// Whether decode's workgroup form stages K (crate::decode::stage_k).
pub(crate) const DECODE_STAGE: Switch = Switch {
    name: "WGPU_ATTENTION_DECODE_STAGE",
    takes: OFF_ON,
};
/// Whether decode's output loop shares out keys or rows (crate::decode::v_by_keys).
pub(crate) const DECODE_V_KEYS: Switch = Switch {
    name: "WGPU_ATTENTION_DECODE_V_KEYS",
    takes: OFF_ON,
};
/// The invocations that share an output in the merge of key splits
/// (crate::kernel::merge::lanes).
pub(crate) const MERGE_LANES: Switch = Switch {
    name: "WGPU_ATTENTION_MERGE_LANES",
    takes: &["1", "2", "4", "8", "16"],
};
/// The order of the barrier kernels' invocations (crate::kernel::pipeline's
/// invocation_order; CI's runs in other orders).
pub(crate) const INVOCATION_ORDER: Switch = Switch {
    name: "WGPU_ATTENTION_INVOCATION_ORDER",
    takes: &["reversed", "interleaved", "interleaved-reversed"],
};
/// `gpu`: a CPU adapter planned as a discrete GPU (crate::profile::DeviceProfile::planning_info).
pub(crate) const PLAN_AS: Switch = Switch {
    name: "WGPU_ATTENTION_PLAN_AS",
    takes: &["gpu"],
};
/// A file that every pipeline built is logged to (crate::kernel::pipeline).
pub(crate) const PIPELINE_LOG: Switch = Switch {
    name: "WGPU_ATTENTION_PIPELINE_LOG",
    takes: &[],
};

/// Every switch.
pub(crate) const ALL: [Switch; 18] = [
    COOP,
    COOP_CHECK,
    COOP_CHECK_WAIT,
    COOP_LANES,
    COOP_DRIVER_LANES,
    COOP_VARIANT,
    COOP_PREFETCH,
    COOP_OUT_ROWS,
    COOP_SCORE_ROWS,
    COOP_SPLIT_P,
    COOP_KEY_SPLITS,
    DECODE_BATCH,
    DECODE_STAGE,
    DECODE_V_KEYS,
    MERGE_LANES,
    INVOCATION_ORDER,
    PLAN_AS,
    PIPELINE_LOG,
];

/// Refuses the process's environment where a switch holds a value it does not take, or a
/// variable begins with [`PREFIX`] and is no switch (the first such variable by name).
pub(crate) fn check_environment() -> Result<()> {
    check(std::env::vars_os())
}

fn check(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Result<()> {
    let mut ours: Vec<(String, OsString)> = vars
        .into_iter()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value)))
        .filter(|(name, _)| name.starts_with(PREFIX))
        .collect();
    ours.sort();
    for (name, value) in ours {
        let shown = value.to_string_lossy().into_owned();
        let refuse = |expected: String| Error::Environment {
            variable: name.clone(),
            value: shown.clone(),
            expected,
        };
        let Some(switch) = ALL.iter().find(|s| s.name == name) else {
            let names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
            return Err(refuse(format!(
                "no variable of this library is so named (a misspelling?); its variables are {}",
                names.join(", ")
            )));
        };
        let Some(value) = value.to_str() else {
            return Err(refuse("not valid UTF-8".into()));
        };
        if !value.is_empty() && !switch.accepts(value) {
            return Err(refuse(format!(
                "expected {} (or empty, for the default)",
                switch.takes.join(", ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
