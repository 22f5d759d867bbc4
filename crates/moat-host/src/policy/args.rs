//! Argument conditions of policy rules: path globs (after lexical normalisation), regexes and
//! numeric bounds, and how they read absent, unreadable and array values.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use regex::Regex;
use serde_json::{Map, Value};

use super::select::PolicyError;
use crate::config::policy::{ArgCondition, Globs};

/// Which arguments a condition looks at.
#[derive(Debug)]
enum Target {
    /// One top-level argument by name.
    Named(String),
    /// Every string anywhere in the arguments (`"*"`).
    AllStrings,
}

/// A compiled condition on the arguments of a call.
#[derive(Debug)]
pub(crate) struct ArgRule {
    target: Target,
    inside: Option<PathGlobs>,
    outside: Option<PathGlobs>,
    regex: Option<Regex>,
    not_regex: Option<Regex>,
    bounds: Bounds,
    if_absent: bool,
}

#[derive(Debug, Default)]
struct Bounds {
    gt: Option<f64>,
    ge: Option<f64>,
    lt: Option<f64>,
    le: Option<f64>,
}

impl Bounds {
    fn is_empty(&self) -> bool {
        self.gt.is_none() && self.ge.is_none() && self.lt.is_none() && self.le.is_none()
    }

    fn hold(&self, n: f64) -> bool {
        self.gt.is_none_or(|b| n > b)
            && self.ge.is_none_or(|b| n >= b)
            && self.lt.is_none_or(|b| n < b)
            && self.le.is_none_or(|b| n <= b)
    }
}

impl ArgRule {
    /// Compiles the condition on argument `key`; `item` names the rule for errors.
    pub(crate) fn new(item: &str, key: &str, cond: &ArgCondition) -> Result<Self, PolicyError> {
        let field = |test: &str| match test {
            "" => format!("args.{key}"),
            test => format!("args.{key}.{test}"),
        };
        let invalid = |test: &str, reason: &str| PolicyError::Invalid {
            item: item.to_owned(),
            field: field(test),
            reason: reason.to_owned(),
        };
        let path_globs = |test: &str, globs: &Option<Globs>| {
            globs
                .as_ref()
                .map(|g| PathGlobs::new(item, &field(test), g))
                .transpose()
        };
        let regex = |test: &str, re: &Option<String>| {
            re.as_deref()
                .map(|re| {
                    Regex::new(re).map_err(|error| PolicyError::Regex {
                        item: item.to_owned(),
                        field: field(test),
                        error,
                    })
                })
                .transpose()
        };
        let bounds = Bounds {
            gt: cond.gt,
            ge: cond.ge,
            lt: cond.lt,
            le: cond.le,
        };
        let named = [
            ("gt", bounds.gt),
            ("ge", bounds.ge),
            ("lt", bounds.lt),
            ("le", bounds.le),
        ];
        if let Some((test, _)) = named.iter().find(|(_, b)| b.is_some_and(f64::is_nan)) {
            return Err(invalid(test, "a bound must be a number, not NaN"));
        }
        let inside = path_globs("inside", &cond.inside)?;
        let outside = path_globs("outside", &cond.outside)?;
        let regex_test = regex("regex", &cond.regex)?;
        let not_regex = regex("not_regex", &cond.not_regex)?;
        let positive = inside.is_some() || regex_test.is_some() || !bounds.is_empty();
        let negative = outside.is_some() || not_regex.is_some();
        if !positive && !negative {
            return Err(invalid("", "the condition tests nothing"));
        }
        let target = if key == "*" {
            Target::AllStrings
        } else {
            Target::Named(key.to_owned())
        };
        if matches!(target, Target::AllStrings) && !bounds.is_empty() {
            return Err(invalid(
                "gt",
                "numeric bounds need a named argument, not \"*\"",
            ));
        }
        Ok(ArgRule {
            target,
            inside,
            outside,
            regex: regex_test,
            not_regex,
            bounds,
            // Only the negative tests ("not proven inside", "does not match") hold for a value
            // that is not there: a confining rule must catch a call that leaves its path out,
            // while a rule looking for a bad value has nothing to find.
            if_absent: cond.if_absent.unwrap_or(negative && !positive),
        })
    }

    /// Whether the condition holds for these arguments. `restrictive` is true for deny and ask
    /// rules: they take the reading that refuses (any array element suffices, an unreadable value
    /// holds); allow rules take the reading that does not grant (every element must hold, an
    /// unreadable value does not).
    pub(crate) fn holds(&self, args: &Map<String, Value>, restrictive: bool) -> bool {
        let mut values = Vec::new();
        match &self.target {
            Target::Named(key) => match args.get(key) {
                Some(Value::Array(items)) => values.extend(items),
                Some(Value::Null) | None => {}
                Some(value) => values.push(value),
            },
            Target::AllStrings => args.values().for_each(|v| collect_strings(v, &mut values)),
        }
        if values.is_empty() {
            return self.if_absent;
        }
        let read = |v: &&Value| self.test(v).unwrap_or(restrictive);
        if restrictive {
            values.iter().any(read)
        } else {
            values.iter().all(read)
        }
    }

    /// The tests on one value; `None` when the value cannot be read as the tests need
    /// (not a string, a relative path, not a number).
    fn test(&self, value: &Value) -> Option<bool> {
        let mut ok = true;
        if self.inside.is_some() || self.outside.is_some() {
            let path = normalize(value.as_str()?)?;
            if let Some(globs) = &self.inside {
                ok &= globs.contains(&path);
            }
            if let Some(globs) = &self.outside {
                ok &= !globs.contains(&path);
            }
        }
        if self.regex.is_some() || self.not_regex.is_some() {
            let text = value.as_str()?;
            if let Some(re) = &self.regex {
                ok &= re.is_match(text);
            }
            if let Some(re) = &self.not_regex {
                ok &= !re.is_match(text);
            }
        }
        if !self.bounds.is_empty() {
            ok &= self.bounds.hold(number(value)?);
        }
        Some(ok)
    }
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::String(_) => out.push(value),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// A JSON number, or a string holding one: servers commonly coerce `"1000"` to 1000, so a bound
/// must not be dodged by quoting.
fn number(value: &Value) -> Option<f64> {
    let n = match value {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    (!n.is_nan()).then_some(n)
}

/// Lexically normalises an absolute path: drops `.` and empty segments and resolves `..`
/// (never above `/`). A relative path gives `None`: where it points depends on a working
/// directory policy cannot see.
pub(crate) fn normalize(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// Path globs; a path is "inside" when it or one of its ancestors matches.
#[derive(Debug)]
struct PathGlobs(GlobSet);

impl PathGlobs {
    fn new(item: &str, field: &str, globs: &Globs) -> Result<Self, PolicyError> {
        let error = |glob: &str, reason: &str| PolicyError::Invalid {
            item: item.to_owned(),
            field: field.to_owned(),
            reason: format!("path glob {glob:?} {reason}"),
        };
        if globs.0.is_empty() {
            return Err(PolicyError::Invalid {
                item: item.to_owned(),
                field: field.to_owned(),
                reason: "the list of globs is empty".to_owned(),
            });
        }
        let mut set = GlobSetBuilder::new();
        for glob in &globs.0 {
            if !(glob.starts_with('/') || glob.starts_with("**")) {
                return Err(error(glob, "must be absolute (start with `/` or `**`)"));
            }
            if glob.split('/').any(|s| s == "." || s == "..") {
                return Err(error(glob, "must not contain `.` or `..` segments"));
            }
            // Ancestors are matched too, so `/p/**` and `/p/` say the same as `/p` and also
            // cover `/p` itself.
            let trimmed = glob.trim_end_matches("/**").trim_end_matches('/');
            let pattern = if trimmed.is_empty() { "/" } else { trimmed };
            let compiled = GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| PolicyError::Glob {
                    item: item.to_owned(),
                    field: field.to_owned(),
                    glob: glob.clone(),
                    error: e,
                })?;
            set.add(compiled);
        }
        set.build().map(PathGlobs).map_err(|e| PolicyError::Glob {
            item: item.to_owned(),
            field: field.to_owned(),
            glob: globs.0.join(", "),
            error: e,
        })
    }

    /// `path` must be normalised.
    fn contains(&self, path: &str) -> bool {
        let mut candidate = path;
        loop {
            if self.0.is_match(candidate) {
                return true;
            }
            match candidate.rfind('/') {
                Some(0) if candidate.len() > 1 => candidate = "/",
                Some(0) | None => return false,
                Some(i) => candidate = &candidate[..i],
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(key: &str, toml_cond: &str) -> ArgRule {
        let cond: ArgCondition = toml::from_str(toml_cond).unwrap();
        ArgRule::new("rule 1", key, &cond).unwrap()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn normalize_resolves_dots_lexically() {
        assert_eq!(normalize("/a/b/../../etc/passwd").unwrap(), "/etc/passwd");
        assert_eq!(normalize("/../../x").unwrap(), "/x");
        assert_eq!(normalize("//a/./b//").unwrap(), "/a/b");
        assert_eq!(normalize("/").unwrap(), "/");
        assert_eq!(normalize("a/b"), None);
        assert_eq!(normalize("~/x"), None);
        assert_eq!(normalize(""), None);
    }

    #[test]
    fn inside_covers_the_directory_and_everything_under_it() {
        let r = rule("path", r#"inside = ["/home/*/project/**"]"#);
        let holds = |p: &str| r.holds(&args(json!({ "path": p })), false);
        assert!(holds("/home/u/project"));
        assert!(holds("/home/u/project/src/main.rs"));
        assert!(!holds("/home/u/projectx"));
        assert!(!holds("/home/u/other/project"));
        assert!(!holds("/home/u/project/../../v/.ssh/id_rsa"));
        assert!(
            !holds("project/src"),
            "relative paths are never proven inside"
        );
    }

    #[test]
    fn double_star_prefix_matches_any_depth() {
        let r = rule("path", r#"inside = "**/.ssh""#);
        assert!(r.holds(&args(json!({ "path": "/home/u/.ssh/id_rsa" })), true));
        assert!(r.holds(&args(json!({ "path": "/.ssh" })), true));
        assert!(!r.holds(&args(json!({ "path": "/home/u/ssh" })), true));
    }

    #[test]
    fn root_glob_contains_every_absolute_path() {
        let r = rule("path", r#"inside = "/""#);
        assert!(r.holds(&args(json!({ "path": "/etc/passwd" })), false));
        assert!(r.holds(&args(json!({ "path": "/" })), false));
    }

    #[test]
    fn absent_values_follow_the_tests_polarity() {
        let empty = Map::new();
        assert!(rule("p", r#"outside = "/x""#).holds(&empty, true));
        assert!(rule("p", r#"not_regex = "x""#).holds(&empty, true));
        assert!(!rule("p", r#"inside = "/x""#).holds(&empty, true));
        assert!(!rule("p", r#"regex = "x""#).holds(&empty, true));
        assert!(!rule("p", "gt = 1").holds(&empty, true));
        assert!(!rule("p", "outside = \"/x\"\nif_absent = false").holds(&empty, true));
        assert!(rule("p", "regex = \"x\"\nif_absent = true").holds(&empty, true));
        assert!(rule("p", r#"outside = "/x""#).holds(&args(json!({ "p": null })), true));
        assert!(rule("p", r#"outside = "/x""#).holds(&args(json!({ "p": [] })), true));
    }

    #[test]
    fn unreadable_values_refuse_in_either_polarity() {
        let r = rule("p", r#"inside = "/x""#);
        let a = args(json!({ "p": 7 }));
        assert!(r.holds(&a, true), "a deny rule holds");
        assert!(!r.holds(&a, false), "an allow rule does not");
    }

    #[test]
    fn arrays_any_for_restrictive_every_for_permissive() {
        let r = rule("p", r#"regex = "^ok""#);
        let mixed = args(json!({ "p": ["ok1", "bad"] }));
        assert!(r.holds(&mixed, true));
        assert!(!r.holds(&mixed, false));
        assert!(r.holds(&args(json!({ "p": ["ok1", "ok2"] })), false));
    }

    #[test]
    fn numbers_and_numeric_strings_are_compared() {
        let r = rule("n", "gt = 100");
        assert!(r.holds(&args(json!({ "n": 101 })), true));
        assert!(!r.holds(&args(json!({ "n": 100 })), true));
        assert!(r.holds(&args(json!({ "n": " 1000 " })), true));
        assert!(r.holds(&args(json!({ "n": "NaN" })), true), "unreadable");
        let range = rule("n", "ge = 1\nle = 10");
        assert!(range.holds(&args(json!({ "n": 1 })), false));
        assert!(!range.holds(&args(json!({ "n": 11 })), false));
        assert!(!range.holds(&args(json!({ "n": 0.5 })), false));
    }

    #[test]
    fn star_reads_every_string_at_any_depth() {
        let r = rule("*", r#"regex = "(?i)ignore previous""#);
        let a = args(json!({ "n": 3, "opts": { "notes": ["x", "IGNORE PREVIOUS orders"] } }));
        assert!(r.holds(&a, true));
        assert!(
            !r.holds(&args(json!({ "n": 3 })), true),
            "no strings: absent"
        );
    }

    #[test]
    fn bad_conditions_are_refused() {
        let err = |key: &str, t: &str| {
            let cond: ArgCondition = toml::from_str(t).unwrap();
            ArgRule::new("rule 2 (x)", key, &cond)
                .unwrap_err()
                .to_string()
        };
        let e = err("path", r#"inside = "rel/*""#);
        assert!(
            e.contains("rule 2 (x)") && e.contains("args.path.inside"),
            "{e}"
        );
        assert!(err("path", r#"outside = "/a/../b""#).contains("`..`"));
        assert!(err("path", r#"inside = "/a/[""#).contains("args.path.inside"));
        assert!(err("q", r#"regex = "(""#).contains("args.q.regex"));
        assert!(err("q", "if_absent = true").contains("tests nothing"));
        assert!(err("*", "gt = 1").contains("named argument"));
        assert!(err("p", "inside = []").contains("empty"));
    }
}
