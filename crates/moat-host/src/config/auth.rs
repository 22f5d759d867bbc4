//! The `[auth]` table: the gateway as an OAuth resource server — whose access tokens it
//! takes over HTTP, which claims name the user and their groups, and which tools need
//! which scopes. Plain data; [`AuthConfig::resource_options`] turns it into the HTTP
//! server's resource options.
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
//!
//! [[auth.issuers]]                             # more issuers, each with its own settings
//! issuer = "https://login.partner.example"
//! audiences = ["https://gw.example/mcp", "moat-gateway"]  # default: `resource` alone
//! user_claim = "email"                         # default: the top-level user_claim
//! groups_claim = "roles"                       # default: the top-level groups_claim
//! ```
//!
//! The top-level `issuer` (with its `jwks_uri`, `audiences` and `[auth.introspection]`) is
//! the first issuer; `[[auth.issuers]]` adds others, or all of them when there is no
//! top-level `issuer`. A JWT is checked by the issuer its `iss` names; an opaque token is
//! introspected at the issuers with `introspection`, in this order, and the first that
//! calls it active decides.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use moat::transport::http::server::{IntrospectionOptions, IssuerOptions, ResourceOptions};
use serde::Deserialize;

use super::duration::DurationValue;
use super::error::ConfigError;
use super::policy::Globs;
use super::source::Source;

/// `[auth]`: who may call the gateway over HTTP, as an OAuth resource server.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AuthConfig {
    /// The authorization servers trusted, in the order configured (never empty).
    pub issuers: Vec<IssuerConfig>,
    /// The issuer whose users per-user state (rate-limit buckets, lasting consent) names by
    /// their plain name: the top-level `issuer`, the single-issuer form. Users of every other
    /// issuer are named with their issuer, so adding or reordering `[[auth.issuers]]` never
    /// gives one issuer's user another's state. `None`: every issuer's users are qualified.
    pub primary: Option<String>,
    /// This gateway's resource URL, which tokens must name in `aud`.
    pub resource: String,
    /// Scopes every token must carry.
    pub scopes: Vec<String>,
    /// The claim whose value is the user policy rules name (`sub` by default), for the
    /// issuers that name none of their own.
    pub user_claim: String,
    /// The claim listing the user's groups (`groups` by default), likewise.
    pub groups_claim: String,
    /// More claims kept for policy rules' `claims` conditions.
    pub claims: Vec<String>,
    /// JWS algorithms accepted (empty: the safe default list).
    pub algorithms: Vec<String>,
    /// Clock skew allowed on `exp`/`nbf` (`None`: the default).
    pub skew: Option<Duration>,
    /// Scopes a tool needs, by glob on the name clients see, in file order.
    pub tool_scopes: Vec<(Globs, Vec<String>)>,
}

/// One trusted authorization server of `[auth]`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct IssuerConfig {
    /// Its issuer identifier: its tokens' `iss`.
    pub issuer: String,
    /// The JWKS URL, for an issuer that publishes no metadata.
    pub jwks_uri: Option<String>,
    /// Opaque tokens by introspection.
    pub introspection: Option<IntrospectionConfig>,
    /// The audiences its tokens may name (empty: the resource alone).
    pub audiences: Vec<String>,
    /// The claim naming the user in its tokens (`None`: `[auth]`'s `user_claim`).
    pub user_claim: Option<String>,
    /// The claim listing the groups in its tokens (`None`: `[auth]`'s `groups_claim`).
    pub groups_claim: Option<String>,
}

impl IssuerConfig {
    /// Tokens of `issuer`, found through its metadata, with `[auth]`'s claim mappings.
    pub fn new(issuer: impl Into<String>) -> IssuerConfig {
        IssuerConfig {
            issuer: issuer.into(),
            jwks_uri: None,
            introspection: None,
            audiences: Vec::new(),
            user_claim: None,
            groups_claim: None,
        }
    }
}

impl AuthConfig {
    /// Tokens of `issuer` for `resource`, with the defaults.
    pub fn new(issuer: impl Into<String>, resource: impl Into<String>) -> AuthConfig {
        let issuer = issuer.into();
        AuthConfig {
            primary: Some(issuer.clone()),
            issuers: vec![IssuerConfig::new(issuer)],
            resource: resource.into(),
            scopes: Vec::new(),
            user_claim: "sub".into(),
            groups_claim: "groups".into(),
            claims: Vec::new(),
            algorithms: Vec::new(),
            skew: None,
            tool_scopes: Vec::new(),
        }
    }

    /// The claims naming the user and their groups in the tokens of `issuer`.
    pub fn claims_of(&self, issuer: Option<&str>) -> (&str, &str) {
        let own = self
            .issuers
            .iter()
            .find(|i| Some(i.issuer.as_str()) == issuer);
        (
            own.and_then(|i| i.user_claim.as_deref())
                .unwrap_or(&self.user_claim),
            own.and_then(|i| i.groups_claim.as_deref())
                .unwrap_or(&self.groups_claim),
        )
    }

    /// Trust `issuer` alone (as `--oauth-issuer` says): its entry if configured, with its
    /// settings, else a new one with the defaults.
    pub fn only_issuer(&mut self, issuer: &str) {
        let kept = self
            .issuers
            .iter()
            .find(|i| i.issuer == issuer)
            .cloned()
            .unwrap_or_else(|| IssuerConfig::new(issuer));
        self.issuers = vec![kept];
    }

    /// The HTTP server's resource-server settings.
    pub fn resource_options(&self) -> Result<ResourceOptions, String> {
        let (first, more) = self
            .issuers
            .split_first()
            .ok_or_else(|| "[auth] names no issuer".to_owned())?;
        let mut r = ResourceOptions::new(first.issuer.clone(), self.resource.clone());
        r.scopes = self.scopes.clone();
        // The claims policy reads: each issuer's user and groups claims, and those rules name.
        r.claims = self.claims.clone();
        for i in &self.issuers {
            let (user, groups) = self.claims_of(Some(&i.issuer));
            for claim in [user, groups] {
                if !r.claims.iter().any(|c| c == claim) {
                    r.claims.push(claim.to_owned());
                }
            }
        }
        if !self.algorithms.is_empty() {
            r.algorithms = self
                .algorithms
                .iter()
                .map(|a| {
                    a.parse()
                        .map_err(|_| format!("[auth] algorithms: unknown algorithm {a:?}"))
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(skew) = self.skew {
            r.skew = skew;
        }
        r.jwks_uri = first.jwks_uri.clone();
        r.introspection = first.introspection.as_ref().map(introspection_options);
        r.audiences = first.audiences.clone();
        r.issuers = more
            .iter()
            .map(|i| {
                let mut o = IssuerOptions::new(i.issuer.clone());
                o.jwks_uri = i.jwks_uri.clone();
                o.introspection = i.introspection.as_ref().map(introspection_options);
                o.audiences = i.audiences.clone();
                o
            })
            .collect();
        Ok(r)
    }
}

fn introspection_options(i: &IntrospectionConfig) -> IntrospectionOptions {
    let mut options = IntrospectionOptions::new(i.client_id.clone(), i.client_secret.clone());
    options.endpoint = i.endpoint.clone();
    options
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
    issuer: Option<String>,
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
    #[serde(default)]
    audiences: Vec<String>,
    introspection: Option<TomlIntrospection>,
    #[serde(default)]
    tool_scopes: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    issuers: Vec<TomlIssuer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlIssuer {
    issuer: String,
    jwks_uri: Option<String>,
    #[serde(default)]
    audiences: Vec<String>,
    user_claim: Option<String>,
    groups_claim: Option<String>,
    introspection: Option<TomlIntrospection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlIntrospection {
    endpoint: Option<String>,
    client_id: String,
    client_secret_env: Option<String>,
    client_secret_file: Option<String>,
}

fn url_value(src: &Source<'_>, at: &[&str], shown: &str, raw: &str) -> Result<String, ConfigError> {
    let value = src.expand(at, shown, raw)?;
    if !(value.starts_with("https://") || value.starts_with("http://")) {
        return Err(src.error(
            at,
            format!("{shown}: {value:?} is not a URL"),
            Some("e.g. \"https://idp.example/realms/acme\"".into()),
        ));
    }
    Ok(value)
}

/// The checked `[auth]` table: URLs and names expanded, the secrets read.
pub(crate) fn auth(src: &Source<'_>, raw: TomlAuth) -> Result<AuthConfig, ConfigError> {
    let at = |key: &'static str| ["auth", key];
    let resource = url_value(src, &at("resource"), "auth.resource", &raw.resource)?;
    let mut issuers = Vec::new();
    let mut primary = None;
    match raw.issuer {
        Some(issuer) => issuers.push(IssuerConfig {
            issuer: {
                let url = url_value(src, &at("issuer"), "auth.issuer", &issuer)?;
                primary = Some(url.clone());
                url
            },
            jwks_uri: match &raw.jwks_uri {
                Some(u) => Some(src.expand(&at("jwks_uri"), "auth.jwks_uri", u)?),
                None => None,
            },
            introspection: match raw.introspection {
                Some(i) => Some(introspection(src, &["auth", "introspection"], i)?),
                None => None,
            },
            audiences: raw.audiences,
            user_claim: None,
            groups_claim: None,
        }),
        None => {
            // The top level's issuer settings without an issuer would apply to nobody.
            for (key, set) in [
                ("jwks_uri", raw.jwks_uri.is_some()),
                ("introspection", raw.introspection.is_some()),
                ("audiences", !raw.audiences.is_empty()),
            ] {
                if set {
                    return Err(src.error(
                        &at(key),
                        "belongs to the top-level `issuer`, which is not set",
                        Some("set `issuer`, or move it into its [[auth.issuers]] entry".into()),
                    ));
                }
            }
        }
    }
    for (n, i) in raw.issuers.into_iter().enumerate() {
        let at = ["auth", "issuers"];
        let shown = |key: &str| format!("auth.issuers[{n}].{key}");
        let issuer = url_value(src, &at, &shown("issuer"), &i.issuer)?;
        if issuers.iter().any(|c: &IssuerConfig| c.issuer == issuer) {
            return Err(src.error(
                &at,
                format!("the issuer {issuer:?} is configured twice"),
                None,
            ));
        }
        issuers.push(IssuerConfig {
            issuer,
            jwks_uri: match &i.jwks_uri {
                Some(u) => Some(src.expand(&at, &shown("jwks_uri"), u)?),
                None => None,
            },
            introspection: match i.introspection {
                Some(t) => Some(introspection(src, &at, t)?),
                None => None,
            },
            audiences: i.audiences,
            user_claim: i.user_claim,
            groups_claim: i.groups_claim,
        });
    }
    if issuers.is_empty() {
        return Err(src.error(
            &["auth"],
            "names no issuer",
            Some(
                "issuer = \"https://idp.example/realms/acme\", or [[auth.issuers]] entries".into(),
            ),
        ));
    }
    let mut config = AuthConfig::new("", resource);
    config.primary = primary;
    config.issuers = issuers;
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
    config.tool_scopes = raw
        .tool_scopes
        .into_iter()
        .map(|(glob, scopes)| (Globs::from(glob.as_str()), scopes))
        .collect();
    Ok(config)
}

fn introspection(
    src: &Source<'_>,
    at: &[&str],
    raw: TomlIntrospection,
) -> Result<IntrospectionConfig, ConfigError> {
    let shown = format!("{}.introspection", at.join("."));
    let client_secret = match (&raw.client_secret_env, &raw.client_secret_file) {
        (Some(var), None) => (src.lookup)(var).ok_or_else(|| {
            src.error(
                at,
                format!("{shown}: client_secret_env names {var:?}, which is not set"),
                None,
            )
        })?,
        (None, Some(file)) => {
            let path: PathBuf = src.path(at, &format!("{shown}.client_secret_file"), file)?;
            std::fs::read_to_string(&path)
                .map_err(|e| src.error(at, format!("cannot read {}: {e}", path.display()), None))?
                .trim()
                .to_owned()
        }
        _ => {
            return Err(src.error(
                at,
                format!("{shown} needs exactly one of client_secret_env and client_secret_file"),
                Some("the secret is never written in moat.toml itself".into()),
            ));
        }
    };
    Ok(IntrospectionConfig {
        endpoint: match &raw.endpoint {
            Some(u) => Some(src.expand(at, &format!("{shown}.endpoint"), u)?),
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
        assert_eq!(auth.issuers[0].issuer, "https://idp.example/realms/acme");
        assert_eq!(auth.user_claim, "preferred_username");
        assert_eq!(auth.skew, Some(std::time::Duration::from_secs(30)));
        let introspection = auth.issuers[0].introspection.clone().unwrap();
        assert_eq!(introspection.client_secret, "s3cret");
        assert!(!format!("{introspection:?}").contains("s3cret"));
        assert_eq!(auth.tool_scopes[0].1, ["db:write"]);
        // The second issuer, with its own claims; the first falls back to the top level's.
        assert_eq!(auth.issuers[1].issuer, "https://login.partner.example");
        assert_eq!(
            auth.claims_of(Some("https://login.partner.example")),
            ("email", "roles")
        );
        assert_eq!(
            auth.claims_of(Some("https://idp.example/realms/acme")),
            ("preferred_username", "groups")
        );
        let r = auth.resource_options().unwrap();
        assert_eq!(r.issuer, "https://idp.example/realms/acme");
        assert_eq!(r.issuers.len(), 1);
        assert_eq!(r.issuers[0].audiences.len(), 2);
        for claim in ["email", "roles", "preferred_username", "groups", "dept"] {
            assert!(
                r.claims.iter().any(|c| c == claim),
                "{claim}: {:?}",
                r.claims
            );
        }
    }

    #[test]
    fn issuers_without_a_top_level_one_and_refusals() {
        let two = "[auth]\nresource = \"https://gw.example/mcp\"\n\
                   [[auth.issuers]]\nissuer = \"https://a.example\"\n\
                   [[auth.issuers]]\nissuer = \"https://b.example\"\nuser_claim = \"email\"\n";
        let auth = load(two, &[]).unwrap().auth.unwrap();
        let names: Vec<&str> = auth.issuers.iter().map(|i| i.issuer.as_str()).collect();
        assert_eq!(names, ["https://a.example", "https://b.example"]);
        assert_eq!(auth.claims_of(Some("https://b.example")).0, "email");
        assert_eq!(auth.claims_of(Some("https://a.example")).0, "sub");
        let mut only = auth.clone();
        only.only_issuer("https://b.example");
        assert_eq!(only.issuers.len(), 1);
        assert_eq!(only.issuers[0].user_claim.as_deref(), Some("email"));
        for (text, needle) in [
            ("[auth]\nresource = \"https://gw/mcp\"\n", "names no issuer"),
            (
                "[auth]\nresource = \"https://gw/mcp\"\njwks_uri = \"https://k\"\n\
                 [[auth.issuers]]\nissuer = \"https://a.example\"\n",
                "top-level `issuer`",
            ),
            (
                "[auth]\nissuer = \"https://a.example\"\nresource = \"https://gw/mcp\"\n\
                 [[auth.issuers]]\nissuer = \"https://a.example\"\n",
                "configured twice",
            ),
            (
                "[auth]\nresource = \"https://gw/mcp\"\n\
                 [[auth.issuers]]\nissuer = \"a.example\"\n",
                "auth.issuers[0].issuer",
            ),
            (
                "[auth]\nresource = \"https://gw/mcp\"\n\
                 [[auth.issuers]]\nissuer = \"https://a.example\"\n\
                 [auth.issuers.introspection]\nclient_id = \"gw\"\n",
                "exactly one of",
            ),
        ] {
            let err = load(text, &[]).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
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
