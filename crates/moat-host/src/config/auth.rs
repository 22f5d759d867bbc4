//! The `[auth]` table: the gateway as an OAuth resource server — whose access tokens it
//! takes over HTTP, which claims name the user and their groups, and which tools need
//! which scopes. Plain data; the host turns it into the HTTP server's resource options.
//!
//! ```toml
//! [auth]
//! issuer = "https://idp.example/realms/acme"   # tokens' `iss`; its metadata names the JWKS
//! resource = "https://gw.example/mcp"          # this gateway's URL: tokens' `aud`
//! scopes = ["mcp:tools"]                       # every token needs them (optional)
//! user_claim = "preferred_username"            # the claim naming the user (default `sub`)
//! groups_claim = "groups"                      # the claim listing their groups (default `groups`)
//! claims = ["email", "dept"]                   # more claims policy rules may test (optional)
//! algorithms = ["RS256", "EdDSA"]              # a narrower allow-list (optional; never HS*/none)
//! skew = "30s"                                 # clock skew on exp/nbf (default 60 s, at most 300 s)
//! jwks_uri = "https://idp.example/keys"        # only for an issuer without metadata
//!
//! [auth.introspection]                         # opaque tokens (RFC 7662), optional
//! client_id = "moat-gateway"
//! client_secret_env = "INTROSPECTION_SECRET"   # or client_secret_file = "secret.txt"
//! endpoint = "https://idp.example/introspect"  # default: the issuer's metadata names it
//!
//! [auth.tool_scopes]                           # scopes a tool needs: 403 insufficient_scope
//! "db__*" = ["db:write"]                       #   (step-up) for a token without them
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::duration::DurationValue;
use super::error::ConfigError;
use super::policy::Globs;
use super::source::Source;

/// `[auth]`: who may call the gateway over HTTP, as an OAuth resource server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AuthConfig {
    /// The authorization server's issuer identifier.
    pub issuer: String,
    /// This gateway's resource URL, which tokens must name in `aud`.
    pub resource: String,
    /// Scopes every token must carry.
    pub scopes: Vec<String>,
    /// The claim whose value is the user policy rules name (`sub` by default).
    pub user_claim: String,
    /// The claim listing the user's groups (`groups` by default).
    pub groups_claim: String,
    /// More claims kept for policy rules' `claims` conditions.
    pub claims: Vec<String>,
    /// JWS algorithms accepted (empty: the safe default list).
    pub algorithms: Vec<String>,
    /// Clock skew allowed on `exp`/`nbf` (`None`: the default).
    pub skew: Option<Duration>,
    /// The JWKS URL, for an issuer that publishes no metadata.
    pub jwks_uri: Option<String>,
    /// Opaque tokens by introspection.
    pub introspection: Option<IntrospectionConfig>,
    /// Scopes a tool needs, by glob on the name clients see, in file order.
    pub tool_scopes: Vec<(Globs, Vec<String>)>,
}

impl AuthConfig {
    /// Tokens of `issuer` for `resource`, with the defaults.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> AuthConfig {
        AuthConfig {
            issuer: issuer.into(),
            resource: resource.into(),
            scopes: Vec::new(),
            user_claim: "sub".into(),
            groups_claim: "groups".into(),
            claims: Vec::new(),
            algorithms: Vec::new(),
            skew: None,
            jwks_uri: None,
            introspection: None,
            tool_scopes: Vec::new(),
        }
    }
}

/// `[auth.introspection]`: where and as whom opaque tokens are introspected.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct IntrospectionConfig {
    /// The endpoint; `None`: the issuer's metadata names it.
    pub endpoint: Option<String>,
    /// The gateway's client id at the authorization server.
    pub client_id: String,
    /// Its secret, read from the environment or a file when the configuration loads.
    pub client_secret: String,
}

impl std::fmt::Debug for IntrospectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionConfig")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TomlAuth {
    issuer: String,
    resource: String,
    #[serde(default)]
    scopes: Vec<String>,
    user_claim: Option<String>,
    groups_claim: Option<String>,
    #[serde(default)]
    claims: Vec<String>,
    #[serde(default)]
    algorithms: Vec<String>,
    skew: Option<DurationValue>,
    jwks_uri: Option<String>,
    introspection: Option<TomlIntrospection>,
    #[serde(default)]
    tool_scopes: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlIntrospection {
    endpoint: Option<String>,
    client_id: String,
    client_secret_env: Option<String>,
    client_secret_file: Option<String>,
}

/// The checked `[auth]` table: URLs and names expanded, the secret read.
pub(crate) fn auth(src: &Source<'_>, raw: TomlAuth) -> Result<AuthConfig, ConfigError> {
    let at = |key: &'static str| ["auth", key];
    let mut config = AuthConfig::new(
        src.expand(&at("issuer"), "auth.issuer", &raw.issuer)?,
        src.expand(&at("resource"), "auth.resource", &raw.resource)?,
    );
    for (key, value) in [("issuer", &config.issuer), ("resource", &config.resource)] {
        if !(value.starts_with("https://") || value.starts_with("http://")) {
            return Err(src.error(
                &at(key),
                format!("{value:?} is not a URL"),
                Some("e.g. \"https://idp.example/realms/acme\"".into()),
            ));
        }
    }
    config.scopes = raw.scopes;
    if let Some(c) = raw.user_claim {
        config.user_claim = c;
    }
    if let Some(c) = raw.groups_claim {
        config.groups_claim = c;
    }
    config.claims = raw.claims;
    config.algorithms = raw.algorithms;
    for alg in &config.algorithms {
        if alg.starts_with("HS") || alg.eq_ignore_ascii_case("none") {
            return Err(src.error(
                &at("algorithms"),
                format!("{alg} is never accepted: a resource server verifies with the issuer's public keys"),
                Some("e.g. [\"RS256\", \"ES256\", \"EdDSA\"]".into()),
            ));
        }
    }
    config.skew = match raw.skew {
        Some(d) if d.0 > Duration::from_secs(300) => {
            return Err(src.error(
                &at("skew"),
                "must be at most 300 s",
                Some("e.g. \"60s\"".into()),
            ));
        }
        Some(d) => Some(d.0),
        None => None,
    };
    config.jwks_uri = match &raw.jwks_uri {
        Some(u) => Some(src.expand(&at("jwks_uri"), "auth.jwks_uri", u)?),
        None => None,
    };
    config.introspection = match raw.introspection {
        Some(i) => Some(introspection(src, i)?),
        None => None,
    };
    config.tool_scopes = raw
        .tool_scopes
        .into_iter()
        .map(|(glob, scopes)| (Globs::from(glob.as_str()), scopes))
        .collect();
    Ok(config)
}

fn introspection(
    src: &Source<'_>,
    raw: TomlIntrospection,
) -> Result<IntrospectionConfig, ConfigError> {
    let at = ["auth", "introspection"];
    let client_secret = match (&raw.client_secret_env, &raw.client_secret_file) {
        (Some(var), None) => (src.lookup)(var).ok_or_else(|| {
            src.error(
                &at,
                format!("client_secret_env names {var:?}, which is not set"),
                None,
            )
        })?,
        (None, Some(file)) => {
            let path: PathBuf = src.path(&at, "auth.introspection.client_secret_file", file)?;
            std::fs::read_to_string(&path)
                .map_err(|e| src.error(&at, format!("cannot read {}: {e}", path.display()), None))?
                .trim()
                .to_owned()
        }
        _ => {
            return Err(src.error(
                &at,
                "needs exactly one of client_secret_env and client_secret_file",
                Some("the secret is never written in moat.toml itself".into()),
            ));
        }
    };
    Ok(IntrospectionConfig {
        endpoint: match &raw.endpoint {
            Some(u) => Some(src.expand(&at, "auth.introspection.endpoint", u)?),
            None => None,
        },
        client_id: raw.client_id,
        client_secret,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError};

    fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let lookup = move |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        Config::from_toml_str_with(text, None, &lookup)
    }

    /// The example in this module's doc, so the doc cannot drift from what parses.
    fn documented_example() -> String {
        let source = include_str!("auth.rs");
        let doc: Vec<&str> = source
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| l.trim_start_matches("//!").strip_prefix(' ').unwrap_or(""))
            .collect();
        let start = doc.iter().position(|l| *l == "```toml").unwrap() + 1;
        let len = doc[start..].iter().position(|l| *l == "```").unwrap();
        doc[start..start + len].join("\n")
    }

    #[test]
    fn the_documented_example_loads() {
        let config = load(&documented_example(), &[("INTROSPECTION_SECRET", "s3cret")]).unwrap();
        let auth = config.auth.unwrap();
        assert_eq!(auth.issuer, "https://idp.example/realms/acme");
        assert_eq!(auth.user_claim, "preferred_username");
        assert_eq!(auth.skew, Some(std::time::Duration::from_secs(30)));
        let introspection = auth.introspection.unwrap();
        assert_eq!(introspection.client_secret, "s3cret");
        assert!(!format!("{introspection:?}").contains("s3cret"));
        assert_eq!(auth.tool_scopes[0].1, ["db:write"]);
    }

    #[test]
    fn defaults_and_refusals() {
        let base =
            "[auth]\nissuer = \"https://idp.example\"\nresource = \"https://gw.example/mcp\"\n";
        let auth = load(base, &[]).unwrap().auth.unwrap();
        assert_eq!(
            (auth.user_claim.as_str(), auth.groups_claim.as_str()),
            ("sub", "groups")
        );
        assert!(load("", &[]).unwrap().auth.is_none());
        for (extra, needle) in [
            ("algorithms = [\"HS256\"]", "never accepted"),
            ("algorithms = [\"none\"]", "never accepted"),
            ("skew = \"10m\"", "at most 300"),
            ("[auth.introspection]\nclient_id = \"gw\"", "exactly one of"),
            (
                "[auth.introspection]\nclient_id = \"gw\"\nclient_secret_env = \"NOPE\"",
                "not set",
            ),
            ("audience = \"x\"", "unknown field"),
        ] {
            let err = load(&format!("{base}{extra}\n"), &[])
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{extra}: {err}");
        }
        let err = load(
            "[auth]\nissuer = \"idp\"\nresource = \"https://gw/mcp\"\n",
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("auth.issuer"), "{err}");
    }
}
