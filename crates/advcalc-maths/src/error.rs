//! The one error type of the library: a message that names the file, column and row at
//! fault, a kind that decides the exit code, an optional cause and an optional hint (what to
//! do about it). Only `main` formats it, as uv does: `error:`, `caused by:` lines, `hint:`.

use std::fmt;

/// Which exit code an error maps to (docs/errors.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad data or I/O: exit 1.
    Data,
    /// Bad arguments or configuration: exit 2.
    Usage,
    /// Stopped on request by this signal (`interrupt::request_stop`): exit 128 + signal, as
    /// shells report a process a signal ended (130 for SIGINT, 143 for SIGTERM).
    Interrupted(i32),
}

/// What a caller may need to tell apart beyond the [`ErrorKind`], set where the error is made
/// so that no decision reads the message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reason {
    /// Nothing a caller branches on.
    #[default]
    Other,
    /// A configuration key nobody reads (`Section::finish`): reported before a key whose
    /// value does not resolve.
    UnknownKey,
    /// Storage could not be read or written (a file that does not open, a request to an
    /// object store that failed): what the bytes hold is unknown, not wrong.
    Storage,
}

/// An error with context. `message` is one line saying what is wrong; `source` is the
/// underlying cause, printed by `main` as `caused by:` lines; `hint` is the fix to try, printed
/// last as `hint: ...` (the message itself holds no suggestion).
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    hint: Option<String>,
    reason: Reason,
    /// The input column and row at fault (rows counted from 0), where there are: lets a
    /// reader that spooled IN name the user's file, line and field (`TrainerInput::locate`).
    cell: Option<(String, usize)>,
}

/// The library's result type: [`Error`] unless another error type is named.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Bad data or I/O (exit 1); `message` names the file, column and row at fault.
    pub fn data(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Data,
            message: message.into(),
            source: None,
            hint: None,
            reason: Reason::Other,
            cell: None,
        }
    }

    /// Bad arguments or configuration (exit 2): what was asked for is wrong, not the data.
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Usage,
            message: message.into(),
            source: None,
            hint: None,
            reason: Reason::Other,
            cell: None,
        }
    }

    /// The work stopped because `signal` asked it to (see `interrupt`).
    pub fn interrupted(signal: i32) -> Self {
        Self {
            kind: ErrorKind::Interrupted(signal),
            message: format!("interrupted by signal {signal}"),
            source: None,
            hint: None,
            reason: Reason::Other,
            cell: None,
        }
    }

    /// Attach the underlying cause.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// Attach an already boxed cause.
    pub fn with_boxed_source(
        mut self,
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    ) -> Self {
        self.source = Some(source);
        self
    }

    /// Attach what the user can do about it (one line, printed by `main` as `hint: ...`).
    ///
    /// The hint stays out of the message and survives [`Error::context`]:
    ///
    /// ```
    /// use advcalc_maths::{Error, ErrorKind};
    ///
    /// let e = Error::usage("OUT is the same file as IN")
    ///     .with_hint("write to another file")
    ///     .context("out.parquet");
    /// assert_eq!(e.kind(), ErrorKind::Usage);
    /// assert_eq!(e.exit_code(), 2);
    /// assert_eq!(e.to_string(), "out.parquet: OUT is the same file as IN");
    /// assert_eq!(e.hint(), Some("write to another file"));
    /// ```
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Say what a caller may branch on ([`Reason`]).
    pub fn with_reason(mut self, reason: Reason) -> Self {
        self.reason = reason;
        self
    }

    /// What a caller may branch on: [`Reason::Other`] unless [`Error::with_reason`] said.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// Say which input column and row (counted from 0) the error is about.
    pub fn with_cell(mut self, column: &str, row: usize) -> Self {
        self.cell = Some((column.to_string(), row));
        self
    }

    /// The input column and row the error is about, when [`Error::with_cell`] said.
    pub fn cell(&self) -> Option<(&str, usize)> {
        self.cell.as_ref().map(|(c, r)| (c.as_str(), *r))
    }

    /// Say where the error happened: `prefix: message`, same kind, cause, hint and reason.
    pub fn context(mut self, prefix: impl fmt::Display) -> Self {
        self.message = format!("{prefix}: {}", self.message);
        self
    }

    /// Data or usage: which exit code the error maps to.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The one-line message with its context prefixes: what `Display` prints, without the
    /// cause or the hint.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The suggested fix, if any.
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// Exit code for this error: 1 for data and I/O, 2 for usage.
    pub fn exit_code(&self) -> i32 {
        match self.kind {
            ErrorKind::Data => 1,
            ErrorKind::Usage => 2,
            ErrorKind::Interrupted(signal) => 128 + signal,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_survives_context_and_stays_out_of_the_message() {
        let e = Error::usage("OUT is the same file as IN")
            .with_hint("write to another file")
            .context("out.parquet");
        assert_eq!(e.message(), "out.parquet: OUT is the same file as IN");
        assert_eq!(e.hint(), Some("write to another file"));
        assert_eq!(e.to_string(), e.message());
        assert_eq!(Error::data("x").hint(), None);
    }

    #[test]
    fn the_reason_is_typed_and_survives_context() {
        assert_eq!(Error::usage("unknown key `x`").reason(), Reason::Other);
        let e = Error::usage("x")
            .with_reason(Reason::UnknownKey)
            .context("c.yaml");
        assert_eq!(e.reason(), Reason::UnknownKey);
        assert_eq!(e.message(), "c.yaml: x");
    }
}
