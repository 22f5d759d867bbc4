//! What a configuration that cannot be loaded reports: the mistake and where it is.

use std::fmt;
use std::path::{Path, PathBuf};

/// A configuration mistake, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file it is in.
    pub file: Option<PathBuf>,
    /// 1-based line.
    pub line: Option<usize>,
    /// 1-based column.
    pub column: Option<usize>,
    /// The dotted path of the field (`servers.fs.args`), empty for the document itself.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it, when that is clear.
    pub hint: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}", file.display())?,
            None => f.write_str("<config>")?,
        }
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read the configuration: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file was read and something in it is wrong.
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
}

impl ConfigError {
    /// The 1-based line of the mistake, when known.
    pub fn line(&self) -> Option<usize> {
        self.diagnostic().and_then(|d| d.line)
    }

    /// The 1-based column of the mistake, when known.
    pub fn column(&self) -> Option<usize> {
        self.diagnostic().and_then(|d| d.column)
    }

    /// The dotted field path of the mistake (empty for the document).
    pub fn field(&self) -> Option<&str> {
        self.diagnostic().map(|d| d.field.as_str())
    }

    /// The file the mistake is in.
    pub fn file(&self) -> Option<&Path> {
        match self {
            ConfigError::Read { path, .. } => Some(path),
            ConfigError::Invalid(d) => d.file.as_deref(),
        }
    }

    /// The located mistake, for an invalid file.
    pub fn diagnostic(&self) -> Option<&Diagnostic> {
        match self {
            ConfigError::Invalid(d) => Some(d),
            ConfigError::Read { .. } => None,
        }
    }
}
