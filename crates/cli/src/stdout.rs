//! ovrctl's output. `outln!` panics when the reader has gone; these end the command
//! the way a C tool ends (SIGPIPE) without letting that signal kill socket writes too.

use std::fmt;
use std::io::{ErrorKind, Write};

/// Writes to stdout. A closed reader ends the process by SIGPIPE; other write errors
/// (a full disk) are ignored: the command's exit status is its result, and a panic would
/// replace it.
pub fn write(args: fmt::Arguments) {
    if let Err(e) = std::io::stdout().lock().write_fmt(args)
        && e.kind() == ErrorKind::BrokenPipe
    {
        ovr_io::die_of_sigpipe();
    }
}

/// `print!` for ovrctl's output (see the module).
macro_rules! out {
    ($($t:tt)*) => { $crate::stdout::write(format_args!($($t)*)) };
}

/// `outln!` for ovrctl's output (see the module).
macro_rules! outln {
    () => { $crate::stdout::write(format_args!("\n")) };
    ($($t:tt)*) => { $crate::stdout::write(format_args!("{}\n", format_args!($($t)*))) };
}
