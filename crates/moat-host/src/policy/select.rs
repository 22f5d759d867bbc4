//! What every kind of policy entry shares: the tool asked about ([`ToolRef`]), the server and
//! tool globs that select it, and the error of an entry that does not compile.

use std::cell::OnceCell;
use std::collections::HashMap;

use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};
use moat_protocol::types::ToolAnnotations;

use crate::config::policy::Globs;

/// The tool policy is asked about.
#[derive(Debug, Clone, Copy)]
pub struct ToolRef<'a> {
    /// The downstream server's configured name.
    pub server: &'a str,
    /// The tool's own name on that server (not `server__tool`: the policy works that out
    /// from the server's prefix).
    pub tool: &'a str,
    /// The annotations the server gave the tool.
    pub annotations: Option<&'a ToolAnnotations>,
}

impl<'a> ToolRef<'a> {
    /// A tool without annotations.
    pub fn new(server: &'a str, tool: &'a str) -> Self {
        ToolRef {
            server,
            tool,
            annotations: None,
        }
    }

    /// Sets the annotations.
    pub fn with_annotations(mut self, annotations: Option<&'a ToolAnnotations>) -> Self {
        self.annotations = annotations;
        self
    }
}

/// A policy configuration that does not compile. `item` names the entry (`rule 3 (no-shell)`,
/// `rate limit 1`, `label 2`) and `field` the key in it (`tool`, `args.path.inside`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A glob that does not parse.
    #[error("policy {item}: `{field}`: bad glob {glob:?}: {error}")]
    Glob {
        /// The entry.
        item: String,
        /// The key.
        field: String,
        /// The glob as written.
        glob: String,
        /// Why it does not parse.
        error: globset::Error,
    },
    /// A regex that does not parse.
    #[error("policy {item}: `{field}`: bad regex: {error}")]
    Regex {
        /// The entry.
        item: String,
        /// The key.
        field: String,
        /// Why it does not parse.
        error: regex::Error,
    },
    /// A value that parses but makes no sense.
    #[error("policy {item}: `{field}`: {reason}")]
    Invalid {
        /// The entry.
        item: String,
        /// The key.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

/// `rule 3 (no-shell)` or `rule 3`, 1-based like the file reads.
pub(crate) fn item_label(kind: &str, index: usize, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("{kind} {} ({name})", index + 1),
        None => format!("{kind} {}", index + 1),
    }
}

/// A tool under both its names: its own, and the one clients see (worked out from the
/// server's prefix on first need, so a rule without a `tool` glob costs no allocation).
pub(crate) struct Named<'a> {
    pub(crate) tool: &'a ToolRef<'a>,
    pub(crate) prefixes: &'a HashMap<String, String>,
    pub(crate) exposed: OnceCell<String>,
}

impl<'a> Named<'a> {
    pub(crate) fn server(&self) -> &str {
        self.tool.server
    }

    pub(crate) fn own(&self) -> &str {
        self.tool.tool
    }

    pub(crate) fn exposed(&self) -> &str {
        self.exposed
            .get_or_init(|| match self.prefixes.get(self.tool.server) {
                Some(prefix) => crate::naming::prefixed_name(prefix, self.tool.tool),
                None => crate::naming::exposed_name(self.tool.server, self.tool.tool),
            })
    }

    pub(crate) fn tool(&self) -> &ToolRef<'a> {
        self.tool
    }
}

/// One side of a selector: the globs as written (for reports) and compiled together (for
/// matching).
#[derive(Debug)]
pub(crate) struct NameGlobs {
    pub(crate) set: GlobSet,
    pub(crate) each: Vec<(String, GlobMatcher)>,
}

/// Server and tool globs; an absent side matches everything.
#[derive(Debug)]
pub(crate) struct Selector {
    pub(crate) server: Option<NameGlobs>,
    pub(crate) tool: Option<NameGlobs>,
}

impl Selector {
    pub(crate) fn new(
        item: &str,
        server: Option<&Globs>,
        tool: Option<&Globs>,
    ) -> Result<Self, PolicyError> {
        Ok(Selector {
            server: server.map(|g| name_globs(item, "server", g)).transpose()?,
            tool: tool.map(|g| name_globs(item, "tool", g)).transpose()?,
        })
    }

    pub(crate) fn matches(&self, tool: &Named) -> bool {
        self.selects_server(tool.server())
            && self
                .tool
                .as_ref()
                .is_none_or(|g| g.set.is_match(tool.own()) || g.set.is_match(tool.exposed()))
    }

    pub(crate) fn selects_server(&self, server: &str) -> bool {
        self.server.as_ref().is_none_or(|g| g.set.is_match(server))
    }
}

pub(crate) fn name_globs(item: &str, field: &str, globs: &Globs) -> Result<NameGlobs, PolicyError> {
    let error = |glob: &str, error| PolicyError::Glob {
        item: item.to_owned(),
        field: field.to_owned(),
        glob: glob.to_owned(),
        error,
    };
    if globs.0.is_empty() {
        return Err(PolicyError::Invalid {
            item: item.to_owned(),
            field: field.to_owned(),
            reason: "the list of globs is empty".to_owned(),
        });
    }
    let mut set = GlobSetBuilder::new();
    let mut each = Vec::with_capacity(globs.0.len());
    for glob in &globs.0 {
        let compiled = Glob::new(glob).map_err(|e| error(glob, e))?;
        each.push((glob.clone(), compiled.compile_matcher()));
        set.add(compiled);
    }
    let set = set.build().map_err(|e| error(&globs.0.join(", "), e))?;
    Ok(NameGlobs { set, each })
}
