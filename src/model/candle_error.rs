//! candle's errors as ours: [`Error::Model`] with a one-line message naming what failed, and
//! candle's error kept as the source.

use crate::error::Error;

/// Turns a candle error from `what` (loading a file, a forward pass, ...) into an
/// [`Error::Model`].
pub(crate) fn candle_err(what: &str) -> impl Fn(candle_core::Error) -> Error + '_ {
    move |e| Error::model_from(format!("{what}: {}", candle_msg(&e)), e)
}

/// A candle error on one line (with `RUST_BACKTRACE` set, candle appends a backtrace).
pub(crate) fn candle_msg(e: &candle_core::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}
