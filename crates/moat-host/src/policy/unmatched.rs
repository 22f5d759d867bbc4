//! Globs that select nothing. A deny rule whose `tool` has a typo denies nothing, and says
//! nothing about it; these checks find such globs and the names the user probably meant.
//!
//! Servers are known from the configuration, so server globs are checked at load. Tools are
//! known only once their servers have listed them, so tool globs are checked against a
//! catalog, and only for entries whose servers have all listed theirs (a server that is down
//! may well have the tool).

use std::fmt;

use globset::GlobMatcher;

use super::{NameGlobs, Policy, Selector, ToolRef};

/// How many close names a report suggests at most.
const SUGGESTIONS: usize = 3;
/// How alike (0 to 1) a name must be to a glob to be suggested.
const ALIKE: f64 = 0.5;
/// How far behind the best suggestion another may be.
const NEAR_BEST: f64 = 0.2;

/// A glob that selects no configured server, or no tool its servers offer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unmatched {
    /// The entry: `rule 2 (no-delete)`, `rate limit 1`, `label 3`, `request rule 1`,
    /// `[tool_search]`.
    pub item: String,
    /// The key: `server`, `tool` or `always`.
    pub field: String,
    /// The glob as written.
    pub glob: String,
    /// What it was checked against: `configured server`, `tool of server files`, …
    pub among: String,
    /// The names most like the glob, best first.
    pub closest: Vec<String>,
}

impl fmt::Display for Unmatched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} = {:?} matches no {}",
            self.item, self.field, self.glob, self.among
        )?;
        if !self.closest.is_empty() {
            write!(f, " (closest: {})", self.closest.join(", "))?;
        }
        Ok(())
    }
}

impl Policy {
    /// Entries (rules, rate limits, labels, request rules) with a `server` glob that selects
    /// none of the configured servers. Empty when the policy was built without its servers
    /// ([`Policy::new`] rather than [`Policy::for_config`]).
    pub fn unmatched_servers(&self) -> Vec<Unmatched> {
        let Some(servers) = &self.servers else {
            return Vec::new();
        };
        let names: Vec<&str> = servers.iter().map(String::as_str).collect();
        let mut out = Vec::new();
        let mut check = |item: &str, globs: Option<&NameGlobs>| {
            for (glob, matcher) in globs.map(|g| g.each.as_slice()).unwrap_or_default() {
                if !names.iter().any(|n| matcher.is_match(n)) {
                    out.push(Unmatched {
                        item: item.to_owned(),
                        field: "server".to_owned(),
                        glob: glob.clone(),
                        among: "configured server".to_owned(),
                        closest: closest(glob, names.iter().copied()),
                    });
                }
            }
        };
        for (item, selector) in self.selectors() {
            check(item, selector.server.as_ref());
        }
        for rule in &self.requests {
            check(&rule.name, rule.server.as_ref());
        }
        out
    }

    /// Entries with a `tool` glob that selects no tool of the servers the entry selects,
    /// by either of its names. `tools` is the catalog as `(server, tool's own name)`;
    /// `listed` the servers whose tools are all in it. An entry that selects a server not
    /// in `listed` is not judged.
    pub fn unmatched_tools(&self, tools: &[(&str, &str)], listed: &[&str]) -> Vec<Unmatched> {
        let configured: Vec<&str> = match &self.servers {
            Some(servers) => servers.iter().map(String::as_str).collect(),
            None => listed.to_vec(),
        };
        let mut out = Vec::new();
        for (item, selector) in self.selectors() {
            let Some(tool_globs) = &selector.tool else {
                continue;
            };
            let selected: Vec<&str> = configured
                .iter()
                .copied()
                .filter(|s| selector.selects_server(s))
                .collect();
            // No server at all is the server glob's report; an unknown server may have it.
            if selected.is_empty() || selected.iter().any(|s| !listed.contains(s)) {
                continue;
            }
            let names: Vec<(String, &str)> = tools
                .iter()
                .filter(|(server, _)| selected.contains(server))
                .map(|(server, tool)| {
                    let exposed = self.exposed_name(&ToolRef::new(server, tool));
                    (exposed, *tool)
                })
                .collect();
            for (glob, matcher) in &tool_globs.each {
                let hit = names
                    .iter()
                    .any(|(exposed, own)| matcher.is_match(own) || matcher.is_match(exposed));
                if hit {
                    continue;
                }
                let candidates = names
                    .iter()
                    .flat_map(|(exposed, own)| [exposed.as_str(), *own]);
                // The tool the user meant may be on a server the entry does not select.
                let mut near: Vec<String> = tools
                    .iter()
                    .filter(|(server, _)| !selected.contains(server))
                    .map(|(server, tool)| (self.exposed_name(&ToolRef::new(server, tool)), *tool))
                    .filter(|(exposed, own)| matcher.is_match(own) || matcher.is_match(exposed))
                    .map(|(exposed, _)| exposed)
                    .take(SUGGESTIONS)
                    .collect();
                for name in closest(glob, candidates) {
                    if near.len() < SUGGESTIONS && !near.contains(&name) {
                        near.push(name);
                    }
                }
                out.push(Unmatched {
                    item: item.to_owned(),
                    field: "tool".to_owned(),
                    glob: glob.clone(),
                    among: among_tools(&selected, configured.len()),
                    closest: near,
                });
            }
        }
        out
    }

    /// Every entry with server and tool globs, with its label, in file order: rules, rate
    /// limits, labels.
    fn selectors(&self) -> impl Iterator<Item = (&str, &Selector)> {
        self.rules
            .iter()
            .map(|r| (r.label.as_str(), &r.selector))
            .chain(self.rates.selectors())
            .chain(self.labels.iter().map(|l| (l.label.as_str(), &l.selector)))
    }
}

/// Globs (`[tool_search] always` and the like) that match none of `names`. `item` and
/// `field` say where they were written.
pub fn unmatched_names(
    item: &str,
    field: &str,
    globs: &[String],
    names: &[&str],
) -> Vec<Unmatched> {
    globs
        .iter()
        .filter_map(|glob| {
            let matcher: GlobMatcher = globset::Glob::new(glob).ok()?.compile_matcher();
            if names.iter().any(|n| matcher.is_match(n)) {
                return None;
            }
            Some(Unmatched {
                item: item.to_owned(),
                field: field.to_owned(),
                glob: glob.clone(),
                among: "tool".to_owned(),
                closest: closest(glob, names.iter().copied()),
            })
        })
        .collect()
}

fn among_tools(selected: &[&str], configured: usize) -> String {
    match selected {
        [one] => format!("tool of server {one}"),
        few if few.len() < configured && few.len() <= 4 => {
            format!("tool of servers {}", few.join(", "))
        }
        _ => "tool".to_owned(),
    }
}

/// The names most like `glob` (its wildcards ignored), best first, without repeats.
fn closest<'a>(glob: &str, names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let literal: String = glob
        .chars()
        .filter(|c| !matches!(c, '*' | '?' | '[' | ']' | '{' | '}'))
        .collect::<String>()
        .to_lowercase();
    let mut scored: Vec<(f64, &str)> = names
        .map(|n| {
            let score = strsim::normalized_damerau_levenshtein(&literal, &n.to_lowercase());
            (score, n)
        })
        .filter(|(score, _)| *score >= ALIKE)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    // Names far behind the best are noise next to it (`write_file` for `delete_fil`).
    let best = scored.first().map_or(0.0, |s| s.0);
    scored.retain(|(score, _)| *score >= best - NEAR_BEST);
    let mut out: Vec<String> = Vec::new();
    for (_, name) in scored {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
        if out.len() == SUGGESTIONS {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_ignores_wildcards_and_case() {
        let names = ["delete_file", "read_file", "files__delete_file", "list"];
        assert_eq!(
            closest("files__delete_fil", names.iter().copied()),
            vec!["files__delete_file".to_owned()]
        );
        assert_eq!(
            closest("delete_fil", names.iter().copied()),
            vec!["delete_file".to_owned()]
        );
        assert_eq!(closest("READ_*", names.iter().copied())[0], "read_file");
        assert!(closest("zzzzzz", names.iter().copied()).is_empty());
    }
}
