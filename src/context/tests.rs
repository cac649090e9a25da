//! Unit tests of context.rs: opening a device when the request with cooperative matrices
//! fails.

use super::*;
use std::cell::RefCell;

/// The requests `open_with_fallback` makes when each with the cooperative matrices
/// fails (`coop_refused`), and what it returns.
fn requests(
    coop: CoopSupport,
    coop_refused: bool,
) -> (
    Vec<wgpu::Features>,
    std::result::Result<CoopSupport, String>,
) {
    let asked = RefCell::new(Vec::new());
    let got = open_with_fallback(wgpu::Features::SHADER_F16, coop, |features| {
        asked.borrow_mut().push(features);
        if coop_refused && features.contains(COOP_FEATURE) {
            Err("feature refused".to_string())
        } else {
            Ok(())
        }
    });
    (asked.into_inner(), got.map(|((), coop)| coop))
}

#[test]
fn a_refused_coop_request_opens_the_device_without_the_tier() {
    let hardware = CoopSupport::Hardware { subgroup: 32 };
    let f16 = wgpu::Features::SHADER_F16;
    // Granted: one request, with the feature, and the tier kept.
    let (asked, got) = requests(hardware.clone(), false);
    assert_eq!(asked, [f16 | COOP_FEATURE]);
    assert_eq!(got, Ok(hardware.clone()));
    // Refused: a second request without it, and the tier unavailable with the reason.
    let (asked, got) = requests(hardware, true);
    assert_eq!(asked, [f16 | COOP_FEATURE, f16]);
    match got {
        Ok(CoopSupport::Unavailable(why)) => assert!(why.contains("feature refused"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Without the tier on the hardware, the feature is never asked for.
    for coop in [
        CoopSupport::Emulated,
        CoopSupport::Unavailable("off".into()),
    ] {
        let (asked, got) = requests(coop.clone(), true);
        assert_eq!(asked, [f16]);
        assert_eq!(got, Ok(coop));
    }
}

#[test]
fn a_refused_plain_request_is_the_error() {
    let got = open_with_fallback(
        wgpu::Features::empty(),
        CoopSupport::Hardware { subgroup: 32 },
        |_| -> std::result::Result<(), String> { Err("no device".into()) },
    );
    assert_eq!(got.map(|_| ()), Err("no device".to_string()));
}
