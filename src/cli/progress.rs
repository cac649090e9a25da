//! Progress on stderr for long work (bench's paths and `--plot` sweep, the soak, the
//! self-check's rows), with indicatif. Drawn only where stderr is a terminal: piped or
//! redirected (logs, CI, the tests, which read stderr) nothing extra is printed.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// How often a bar or spinner redraws by itself, so that a kernel compiling for seconds
/// (lavapipe's first run) does not look hung.
const TICK: Duration = Duration::from_millis(120);

/// A progress bar or spinner; hidden where stderr is not a terminal.
pub struct Progress(ProgressBar);

impl Progress {
    /// A bar of `total` steps, each named by [`Progress::working_on`].
    pub fn bar(total: usize, what: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress(ProgressBar::hidden());
        }
        let bar = ProgressBar::new(total as u64);
        let style = ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:30}] {pos}/{len} {wide_msg} {elapsed}",
        )
        .map(|s| s.progress_chars("#>-"))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(what.to_string());
        bar.enable_steady_tick(TICK);
        Progress(bar)
    }

    /// A spinner saying what is running, for work of unknown length.
    pub fn spinner(what: impl Into<String>) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress(ProgressBar::hidden());
        }
        let bar = ProgressBar::new_spinner();
        let style = ProgressStyle::with_template("{spinner} {wide_msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.set_message(what.into());
        bar.enable_steady_tick(TICK);
        Progress(bar)
    }

    /// Names the step now running.
    pub fn working_on(&self, what: impl Into<String>) {
        self.0.set_message(what.into());
    }

    /// One step done.
    pub fn step(&self) {
        self.0.inc(1);
    }

    /// Runs `f` (which prints) with the bar cleared from the terminal meanwhile.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.0.suspend(f)
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl Drop for Progress {
    /// A bar left behind by an early return (an error) is cleared too, before the error line.
    fn drop(&mut self) {
        if !self.0.is_finished() {
            self.0.finish_and_clear();
        }
    }
}
