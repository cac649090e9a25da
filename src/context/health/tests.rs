//! Unit tests of health.rs: a wait that runs past its limit takes the device for hung.

use crate::error::Error;
use crate::Context;
use std::time::Duration;

/// A context on this machine's adapter, or `None` where there is none and `REQUIRE_GPU` is
/// unset.
fn context() -> Option<Context> {
    match Context::new() {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(
                std::env::var_os("REQUIRE_GPU").is_none(),
                "no GPU context: {e}"
            );
            None
        }
    }
}

/// Submits a copy of 2 x 128 MiB (one binding at most) without waiting for it: work that
/// lavapipe takes tens of milliseconds over.
fn submit_long_copy(ctx: &Context) {
    let copy = crate::perf::CopyJob::new(ctx, 128 << 20).expect("copy");
    copy.submit(ctx).expect("submitted");
}

/// The message of a [`Error::DeviceLost`], or a failure naming what came instead.
fn lost_message(got: crate::error::Result<()>) -> String {
    match got {
        Err(Error::DeviceLost { message, .. }) => message,
        other => panic!("expected DeviceLost, got {other:?}"),
    }
}

/// A wait that runs past its limit (1 ms for a copy of 2 x 128 MiB; in use, a kernel that
/// does not end) takes the device for hung: that wait fails with
/// [`Error::DeviceLost`] naming the work and the limit, every later call fails the same way
/// at once (it does not wait on the device again), and the limit holds only inside the
/// closure (the same copy then waits to its end on another context). A limit of 0 takes
/// the work for unfinished without asking the device, even where it has ended: what the
/// switch that stands in for a hang in the tool's tests relies on. The hung contexts drop
/// without waiting for their queues (Drop in context.rs; lavapipe would finish the copy
/// anyway, so only that the drop returns is seen here).
#[test]
fn a_wait_past_its_limit_takes_the_device_for_hung() {
    let Some(ctx) = context() else {
        return;
    };
    submit_long_copy(&ctx);
    let limit = Duration::from_millis(1);
    let message = lost_message(ctx.with_wait_limit(limit, "a test's copy", || ctx.wait()));
    assert!(
        message.contains("had not finished a test's copy after 0.001 s")
            && message.contains("this context runs nothing more"),
        "{message}"
    );
    assert_eq!(ctx.lost_reason().as_deref(), Some(message.as_str()));
    let later = ctx.upload("later", &[1.0f32]).map(|_| ());
    assert_eq!(lost_message(later), message);
    assert_eq!(lost_message(ctx.wait()), message);
    drop(ctx);

    let Some(other) = context() else {
        return;
    };
    submit_long_copy(&other);
    other.wait().expect("no limit outside the closure");
    let message = lost_message(other.with_wait_limit(Duration::ZERO, "nothing", || other.wait()));
    assert!(
        message.contains("had not finished nothing after 0 s"),
        "{message}"
    );
}
