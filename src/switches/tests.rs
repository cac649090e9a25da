//! Unit tests of switches.rs: which environments a context refuses.

use super::*;

fn env(vars: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    vars.iter()
        .map(|(name, value)| (OsString::from(name), OsString::from(value)))
        .collect()
}

/// The refusal of `vars`, as (variable, value, expected).
fn refusal(vars: &[(&str, &str)]) -> Option<(String, String, String)> {
    match check(env(vars)) {
        Ok(()) => None,
        Err(Error::Environment {
            variable,
            value,
            expected,
        }) => Some((variable, value, expected)),
        Err(e) => panic!("not an environment error: {e}"),
    }
}

#[test]
fn every_switch_takes_each_of_its_values_and_the_empty_one() {
    for switch in ALL {
        assert!(switch.name.starts_with(PREFIX), "{}", switch.name);
        assert_eq!(refusal(&[(switch.name, "")]), None, "{}", switch.name);
        for value in switch.takes {
            assert_eq!(
                refusal(&[(switch.name, value)]),
                None,
                "{}={value}",
                switch.name
            );
        }
    }
    assert_eq!(
        refusal(&[("WGPU_ATTENTION_PIPELINE_LOG", "/tmp/any/path.log")]),
        None
    );
    let mut names: Vec<&str> = ALL.iter().map(|s| s.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), ALL.len(), "a name declared twice");
}

#[test]
fn a_value_a_switch_does_not_take_is_refused_with_what_it_takes() {
    let (variable, value, expected) = refusal(&[
        ("WGPU_ATTENTION_COOP", "emulate"),
        ("WGPU_ATTENTION_INVOCATION_ORDER", "reverse"),
    ])
    .unwrap_or_default();
    assert_eq!(variable, "WGPU_ATTENTION_INVOCATION_ORDER");
    assert_eq!(value, "reverse");
    assert!(
        expected.contains("reversed, interleaved, interleaved-reversed"),
        "{expected}"
    );
    for (name, value) in [
        ("WGPU_ATTENTION_COOP", "emulated-tier"),
        ("WGPU_ATTENTION_COOP_VARIANT", "64x96"),
        ("WGPU_ATTENTION_COOP_LANES", "8"),
        ("WGPU_ATTENTION_DECODE_BATCH", "17"),
        ("WGPU_ATTENTION_DECODE_BATCH", "0"),
        ("WGPU_ATTENTION_MERGE_LANES", "3"),
        ("WGPU_ATTENTION_COOP_SPLIT_P", "off"),
        ("WGPU_ATTENTION_PLAN_AS", "GPU"),
        ("WGPU_ATTENTION_COOP_PREFETCH", " 1"),
    ] {
        let got = refusal(&[(name, value)]);
        assert_eq!(
            got.as_ref().map(|(n, v, _)| (n.as_str(), v.as_str())),
            Some((name, value)),
            "{name}={value}"
        );
    }
}

#[test]
fn a_misspelt_name_is_refused_and_other_variables_are_not_read() {
    let (variable, _, expected) =
        refusal(&[("WGPU_ATTENTION_COOP_VARIENT", "64x128")]).unwrap_or_default();
    assert_eq!(variable, "WGPU_ATTENTION_COOP_VARIENT");
    assert!(
        expected.contains("WGPU_ATTENTION_COOP_VARIANT"),
        "{expected}"
    );
    assert_eq!(
        refusal(&[
            ("WGPU_BACKEND", "vulkan"),
            ("WGPU_ADAPTER_NAME", "llvmpipe"),
            ("LP_NATIVE_VECTOR_WIDTH", "512"),
            ("wgpu_attention_coop", "anything"),
        ]),
        None
    );
}

#[cfg(unix)]
#[test]
fn a_value_not_in_utf8_is_refused() {
    use std::os::unix::ffi::OsStringExt;
    let vars = vec![(
        OsString::from("WGPU_ATTENTION_COOP"),
        OsString::from_vec(vec![0x65, 0xff]),
    )];
    assert!(matches!(
        check(vars),
        Err(Error::Environment { expected, .. }) if expected.contains("UTF-8")
    ));
}
