//! The `[store]` table: where the state that gateways may share lives ([`crate::store`]
//! keeps it).

use std::path::PathBuf;

use serde::Deserialize;

/// The `[store]` table of the configuration.
///
/// ```toml
/// [store]
/// url = "postgres://moat@db.internal/moat?sslmode=require"  # default: SQLite in the state directory
/// password_env = "MOAT_STORE_PASSWORD"  # the password from this variable (default: that name, if set)
/// password_file = "/run/secrets/moat-store"  # or from this file (first line)
/// ```
///
/// Without `url`, pins, consent decisions and the audit trail stay in SQLite files of the
/// state directory (one machine). With a `postgres://` URL, every gateway given the same URL
/// shares them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct StoreConfig {
    /// `postgres://user@host:port/database?sslmode=disable|prefer|require`; `None`: SQLite.
    pub url: Option<String>,
    /// The environment variable holding the password ([`DEFAULT_PASSWORD_ENV`] when unset).
    pub password_env: Option<String>,
    /// A file whose first line is the password (a mounted secret).
    pub password_file: Option<PathBuf>,
}

/// The variable the password is read from when `password_env` is not given.
pub const DEFAULT_PASSWORD_ENV: &str = "MOAT_STORE_PASSWORD";

impl StoreConfig {
    /// A configuration for `url`, the password found as by default.
    pub fn with_url(url: impl Into<String>) -> StoreConfig {
        StoreConfig {
            url: Some(url.into()),
            ..StoreConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects_unknown_keys() {
        let c: StoreConfig = toml::from_str("").unwrap();
        assert_eq!(c, StoreConfig::default());
        let c: StoreConfig =
            toml::from_str("url = \"postgres://a@b/c\"\npassword_file = \"/run/p\"").unwrap();
        assert_eq!(c.url.as_deref(), Some("postgres://a@b/c"));
        assert_eq!(c.password_file, Some(PathBuf::from("/run/p")));
        assert!(toml::from_str::<StoreConfig>("host = \"x\"").is_err());
    }
}
