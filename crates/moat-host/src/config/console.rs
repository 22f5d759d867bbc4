//! The `[console]` table: how people log in to the web console (`moat gateway --console`)
//! besides the one-time link it prints — through an OpenID Connect provider, and who of its
//! users may. Plain data; the console module runs the login.
//!
//! ```toml
//! [console.oidc]
//! issuer = "https://idp.example/realms/acme"  # its /.well-known/openid-configuration is read
//! client_id = "moat-console"                  # the console's client at the provider: ID tokens' `aud`
//! client_secret_env = "CONSOLE_OIDC_SECRET"   # or client_secret_file; neither: a public client
//! redirect_uri = "https://console.example/oidc/callback"  # default http://<console address>/oidc/callback
//! name = "Acme SSO"                           # the button says "Sign in with Acme SSO" (default: the issuer)
//! scopes = ["openid", "profile", "groups"]    # asked for (default ["openid"]; openid is always asked)
//! user_claim = "preferred_username"           # default: [auth]'s for this issuer, else `sub`
//! groups_claim = "groups"                     # default: [auth]'s for this issuer, else `groups`
//! users = ["alice"]                           # who may use the console...
//! groups = ["ops"]                            # ...or any member of these groups
//! ```
//!
//! At least one of `users` and `groups` is required: a provider's users are many, and the
//! console approves calls. Changes apply when the gateway starts again, except `users` and
//! `groups`: the console reads them from the configuration in force at each request, so a
//! reload applies them to new sign-ins and to open sessions.

use std::path::PathBuf;

use serde::Deserialize;

use super::auth::AuthConfig;
use super::error::ConfigError;
use super::source::Source;

/// `[console]`.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ConsoleConfig {
    /// `[console.oidc]`: logging in through an OpenID Connect provider (`None`: only the
    /// one-time link).
    pub oidc: Option<ConsoleOidc>,
}

/// `[console.oidc]`, checked: secrets read, claims defaulted.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsoleOidc {
    /// The provider's issuer identifier (its ID tokens' `iss`).
    pub issuer: String,
    /// The console's client id there (its ID tokens' `aud`).
    pub client_id: String,
    /// The client secret, for a confidential client.
    pub client_secret: Option<String>,
    /// Where the provider sends the browser back (`None`: the console's own address).
    pub redirect_uri: Option<String>,
    /// What the sign-in button calls the provider.
    pub name: String,
    /// The scopes asked for (always with `openid`).
    pub scopes: Vec<String>,
    /// The ID token claim naming the user.
    pub user_claim: String,
    /// The ID token claim listing the user's groups.
    pub groups_claim: String,
    /// Users allowed in, by that claim's value.
    pub users: Vec<String>,
    /// Groups whose members are allowed in.
    pub groups: Vec<String>,
}

impl std::fmt::Debug for ConsoleOidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret stays out of logs.
        f.debug_struct("ConsoleOidc")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("redirect_uri", &self.redirect_uri)
            .field("users", &self.users)
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl ConsoleOidc {
    /// Whether a user with `user` and `groups` may use the console.
    pub fn allows(&self, user: &str, groups: &[&str]) -> bool {
        self.users.iter().any(|u| u == user)
            || groups.iter().any(|g| self.groups.iter().any(|a| a == g))
    }
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TomlConsole {
    oidc: Option<TomlOidc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlOidc {
    issuer: String,
    client_id: String,
    client_secret_env: Option<String>,
    client_secret_file: Option<String>,
    redirect_uri: Option<String>,
    name: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
    user_claim: Option<String>,
    groups_claim: Option<String>,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    groups: Vec<String>,
}

/// The checked `[console]` table; `auth` lends its claim mappings for the same issuer.
pub(crate) fn console(
    src: &Source<'_>,
    raw: TomlConsole,
    auth: Option<&AuthConfig>,
) -> Result<ConsoleConfig, ConfigError> {
    let Some(raw) = raw.oidc else {
        return Ok(ConsoleConfig::default());
    };
    let at: &[&str] = &["console", "oidc"];
    let url = |key: &str, value: &str| -> Result<String, ConfigError> {
        let shown = format!("console.oidc.{key}");
        let value = src.expand(at, &shown, value)?;
        if !(value.starts_with("https://") || value.starts_with("http://")) {
            return Err(src.error(
                at,
                format!("{shown}: {value:?} is not a URL"),
                Some("e.g. \"https://idp.example/realms/acme\"".into()),
            ));
        }
        Ok(value)
    };
    let issuer = url("issuer", &raw.issuer)?;
    let redirect_uri = match &raw.redirect_uri {
        Some(u) => Some(url("redirect_uri", u)?),
        None => None,
    };
    let client_secret = match (&raw.client_secret_env, &raw.client_secret_file) {
        (None, None) => None,
        (Some(var), None) => Some((src.lookup)(var).ok_or_else(|| {
            src.error(
                at,
                format!("client_secret_env names {var:?}, which is not set"),
                None,
            )
        })?),
        (None, Some(file)) => {
            let path: PathBuf = src.path(at, "console.oidc.client_secret_file", file)?;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| src.error(at, format!("cannot read {}: {e}", path.display()), None))?;
            Some(text.trim().to_owned())
        }
        (Some(_), Some(_)) => {
            return Err(src.error(
                at,
                "one of client_secret_env and client_secret_file, not both",
                None,
            ));
        }
    };
    if raw.users.is_empty() && raw.groups.is_empty() {
        return Err(src.error(
            at,
            "`users` or `groups` is needed: who of the provider's users may approve calls",
            Some("e.g. users = [\"alice\"] or groups = [\"ops\"]".into()),
        ));
    }
    let (auth_user, auth_groups) = auth
        .map(|a| a.claims_of(Some(&issuer)))
        .unwrap_or(("sub", "groups"));
    let mut scopes = vec!["openid".to_owned()];
    scopes.extend(raw.scopes.into_iter().filter(|s| s != "openid"));
    Ok(ConsoleConfig {
        oidc: Some(ConsoleOidc {
            name: raw.name.unwrap_or_else(|| issuer.clone()),
            issuer,
            client_id: src.expand(at, "console.oidc.client_id", &raw.client_id)?,
            client_secret,
            redirect_uri,
            scopes,
            user_claim: raw.user_claim.unwrap_or_else(|| auth_user.to_owned()),
            groups_claim: raw.groups_claim.unwrap_or_else(|| auth_groups.to_owned()),
            users: raw.users,
            groups: raw.groups,
        }),
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
        Config::from_str_with(text, None, &lookup)
    }

    #[test]
    fn parses_with_defaults_from_auth() {
        let c = load(
            "[auth]\nissuer = \"https://idp.example\"\nresource = \"https://gw.example/mcp\"\n\
             user_claim = \"email\"\n\n[console.oidc]\nissuer = \"https://idp.example\"\n\
             client_id = \"moat-console\"\nclient_secret_env = \"S\"\ngroups = [\"ops\"]\n",
            &[("S", "shh")],
        )
        .unwrap();
        let o = c.console.oidc.unwrap();
        assert_eq!(o.user_claim, "email");
        assert_eq!(o.groups_claim, "groups");
        assert_eq!(o.client_secret.as_deref(), Some("shh"));
        assert_eq!(o.scopes, ["openid"]);
        assert_eq!(o.name, "https://idp.example");
        assert!(o.allows("bob", &["dev", "ops"]));
        assert!(!o.allows("bob", &["dev"]));
        assert!(!format!("{o:?}").contains("shh"), "the secret is not shown");
    }

    #[test]
    fn needs_an_allow_list_and_a_url() {
        let e = load(
            "[console.oidc]\nissuer = \"https://idp.example\"\nclient_id = \"c\"\n",
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("users"), "{e}");
        let e = load(
            "[console.oidc]\nissuer = \"idp\"\nclient_id = \"c\"\nusers = [\"a\"]\n",
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a URL"), "{e}");
        let e = load(
            "[console.oidc]\nissuer = \"https://i\"\nclient_id = \"c\"\nusers = [\"a\"]\n\
             client_secret_env = \"NOPE\"\n",
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("NOPE"), "{e}");
        assert!(load("[console]\nlogin = \"x\"\n", &[]).is_err());
        assert_eq!(load("", &[]).unwrap().console.oidc, None);
    }
}
