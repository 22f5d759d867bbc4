//! Reading `[servers.NAME.auth]` (the credentials sent to a URL server; the types are in
//! `server.rs`): names expanded, secrets read from the environment or files, keys that do
//! not fit the mode refused.

use std::time::Duration;

use super::duration::DurationValue;
use super::error::ConfigError;
use super::server::{DownstreamAuth, ExchangeAuth, OAuthAuth, SecretValue, StaticAuth};
use super::source::Source;
use serde::Deserialize;

/// How long a user's own connection to an `exchange` or `oauth` server may go unused
/// before it is closed, unless `idle_timeout` says otherwise. Each open connection holds a
/// session at the server (and, for `oauth`, a refreshable token in memory); a user who
/// comes back gets a new one, with no new authorization.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// `[servers.NAME.auth]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TomlServerAuth {
    mode: String,
    // static
    header: Option<String>,
    scheme: Option<String>,
    value_env: Option<String>,
    value_file: Option<String>,
    // exchange
    issuer: Option<String>,
    token_endpoint: Option<String>,
    client_id: Option<String>,
    client_secret_env: Option<String>,
    client_secret_file: Option<String>,
    audience: Option<String>,
    resource: Option<String>,
    scope: Option<String>,
    // oauth
    callback: Option<String>,
    key_env: Option<String>,
    key_file: Option<String>,
    // exchange and oauth
    idle_timeout: Option<DurationValue>,
}

/// The checked `[servers.NAME.auth]` of the URL server `name` at `url`: names expanded,
/// secrets read.
pub(crate) fn downstream_auth(
    src: &Source<'_>,
    name: &str,
    url: &str,
    raw: TomlServerAuth,
) -> Result<DownstreamAuth, ConfigError> {
    let at = |key: &'static str| vec!["servers", name, "auth", key];
    let shown = |key: &str| format!("servers.{name}.auth.{key}");
    let secret = |env_key: &'static str,
                  env: &Option<String>,
                  file_key: &'static str,
                  file: &Option<String>|
     -> Result<SecretValue, ConfigError> {
        match (env, file) {
            (Some(var), None) => (src.lookup)(var).map(SecretValue::new).ok_or_else(|| {
                src.error(
                    &at(env_key),
                    format!("{env_key} names {var:?}, which is not set"),
                    None,
                )
            }),
            (None, Some(file)) => {
                let path = src.path(&at(file_key), &shown(file_key), file)?;
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    src.error(
                        &at(file_key),
                        format!("cannot read {}: {e}", path.display()),
                        None,
                    )
                })?;
                Ok(SecretValue::new(text.trim()))
            }
            _ => Err(src.error(
                &["servers", name, "auth"],
                format!("needs exactly one of {env_key} and {file_key}"),
                Some("the secret is never written in moat.toml itself".into()),
            )),
        }
    };
    let refuse_keys = |keys: &[(&'static str, bool)], mode: &str| {
        for (key, given) in keys {
            if *given {
                return Err(src.error(
                    &at(key),
                    format!("`{key}` does not apply to mode = {mode:?}"),
                    Some("remove it".into()),
                ));
            }
        }
        Ok(())
    };
    let expand = |key: &'static str, v: &Option<String>| -> Result<Option<String>, ConfigError> {
        match v {
            Some(v) => Ok(Some(src.expand(&at(key), &shown(key), v)?)),
            None => Ok(None),
        }
    };
    let idle_timeout = match &raw.idle_timeout {
        Some(d) if d.0.is_zero() => {
            return Err(src.error(
                &at("idle_timeout"),
                "must be longer than zero",
                Some("e.g. \"10m\"".into()),
            ));
        }
        Some(d) => d.0,
        None => DEFAULT_IDLE_TIMEOUT,
    };
    match raw.mode.as_str() {
        "static" => {
            refuse_keys(
                &[
                    ("issuer", raw.issuer.is_some()),
                    ("token_endpoint", raw.token_endpoint.is_some()),
                    ("client_id", raw.client_id.is_some()),
                    ("client_secret_env", raw.client_secret_env.is_some()),
                    ("client_secret_file", raw.client_secret_file.is_some()),
                    ("audience", raw.audience.is_some()),
                    ("resource", raw.resource.is_some()),
                    ("scope", raw.scope.is_some()),
                    ("callback", raw.callback.is_some()),
                    ("key_env", raw.key_env.is_some()),
                    ("key_file", raw.key_file.is_some()),
                    ("idle_timeout", raw.idle_timeout.is_some()),
                ],
                "static",
            )?;
            let header = raw.header.unwrap_or_else(|| "Authorization".into());
            if hyper::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err(src.error(
                    &at("header"),
                    format!("{header:?} is not a header name"),
                    None,
                ));
            }
            let prefix = match raw.scheme {
                Some(s) if s.is_empty() => String::new(),
                Some(s) => format!("{s} "),
                None if header.eq_ignore_ascii_case("authorization") => "Bearer ".into(),
                None => String::new(),
            };
            let secret = secret("value_env", &raw.value_env, "value_file", &raw.value_file)?;
            if hyper::header::HeaderValue::from_str(&format!("{prefix}{}", secret.expose()))
                .is_err()
            {
                return Err(src.error(
                    &["servers", name, "auth"],
                    "the secret cannot be sent in a header (it has a line break or a control character)",
                    None,
                ));
            }
            Ok(DownstreamAuth::Static(StaticAuth {
                header,
                prefix,
                secret,
            }))
        }
        "exchange" => {
            refuse_keys(
                &[
                    ("header", raw.header.is_some()),
                    ("scheme", raw.scheme.is_some()),
                    ("value_env", raw.value_env.is_some()),
                    ("value_file", raw.value_file.is_some()),
                    ("callback", raw.callback.is_some()),
                    ("key_env", raw.key_env.is_some()),
                    ("key_file", raw.key_file.is_some()),
                ],
                "exchange",
            )?;
            let issuer = expand("issuer", &raw.issuer)?;
            let token_endpoint = expand("token_endpoint", &raw.token_endpoint)?;
            if issuer.is_none() && token_endpoint.is_none() {
                return Err(src.error(
                    &["servers", name, "auth"],
                    "mode = \"exchange\" needs `issuer` (its metadata names the token endpoint) or `token_endpoint`",
                    None,
                ));
            }
            for (key, value) in [("issuer", &issuer), ("token_endpoint", &token_endpoint)] {
                if let Some(v) = value
                    && !(v.starts_with("https://") || v.starts_with("http://"))
                {
                    return Err(src.error(&at(key), format!("{v:?} is not a URL"), None));
                }
            }
            let Some(client_id) = raw.client_id else {
                return Err(src.error(
                    &["servers", name, "auth"],
                    "mode = \"exchange\" needs `client_id` (the gateway's client at the authorization server)",
                    None,
                ));
            };
            let client_secret = secret(
                "client_secret_env",
                &raw.client_secret_env,
                "client_secret_file",
                &raw.client_secret_file,
            )?;
            Ok(DownstreamAuth::Exchange(ExchangeAuth {
                issuer,
                token_endpoint,
                client_id,
                client_secret,
                audience: expand("audience", &raw.audience)?,
                resource: expand("resource", &raw.resource)?.unwrap_or_else(|| url.to_owned()),
                scope: raw.scope,
                idle_timeout,
            }))
        }
        "oauth" => {
            refuse_keys(
                &[
                    ("header", raw.header.is_some()),
                    ("scheme", raw.scheme.is_some()),
                    ("value_env", raw.value_env.is_some()),
                    ("value_file", raw.value_file.is_some()),
                    ("issuer", raw.issuer.is_some()),
                    ("token_endpoint", raw.token_endpoint.is_some()),
                    ("audience", raw.audience.is_some()),
                    ("resource", raw.resource.is_some()),
                    ("scope", raw.scope.is_some()),
                ],
                "oauth",
            )?;
            let Some(callback) = expand("callback", &raw.callback)? else {
                return Err(src.error(
                    &["servers", name, "auth"],
                    "mode = \"oauth\" needs `callback`, the redirect URI the gateway listens on",
                    Some("e.g. callback = \"http://127.0.0.1:8765/oauth/callback\"".into()),
                ));
            };
            let parsed = url::Url::parse(&callback).ok();
            if !parsed.as_ref().is_some_and(|u| {
                u.scheme() == "http"
                    && u.host_str().is_some()
                    && u.port_or_known_default().is_some()
            }) {
                return Err(src.error(
                    &at("callback"),
                    format!("{callback:?} is not an http:// URL with a host the gateway can listen on"),
                    Some("e.g. \"http://127.0.0.1:8765/oauth/callback\" (behind an https proxy that forwards to it)".into()),
                ));
            }
            let client_secret =
                if raw.client_secret_env.is_some() || raw.client_secret_file.is_some() {
                    Some(secret(
                        "client_secret_env",
                        &raw.client_secret_env,
                        "client_secret_file",
                        &raw.client_secret_file,
                    )?)
                } else {
                    None
                };
            if client_secret.is_some() && raw.client_id.is_none() {
                return Err(src.error(
                    &["servers", name, "auth"],
                    "a client secret needs its `client_id`",
                    None,
                ));
            }
            let key = match &raw.key_env {
                Some(var) => Some((src.lookup)(var).map(SecretValue::new).ok_or_else(|| {
                    src.error(
                        &at("key_env"),
                        format!("key_env names {var:?}, which is not set"),
                        None,
                    )
                })?),
                None => None,
            };
            let key_file = match &raw.key_file {
                Some(f) => Some(src.path(&at("key_file"), &shown("key_file"), f)?),
                None => None,
            };
            Ok(DownstreamAuth::OAuth(OAuthAuth {
                callback,
                client_id: raw.client_id,
                client_secret,
                key,
                key_file,
                idle_timeout,
            }))
        }
        other => Err(src.error(
            &at("mode"),
            format!("{other:?} is not a mode of downstream credentials"),
            Some("use \"static\", \"exchange\" or \"oauth\"".into()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, DownstreamAuth};
    use std::time::Duration;

    fn auth(extra: &str) -> Result<DownstreamAuth, String> {
        let text = format!(
            "[servers.api]\nurl = \"https://api.example/mcp\"\n[servers.api.auth]\n{extra}\n"
        );
        let lookup = |name: &str| (name == "S").then(|| "secret".to_owned());
        let config = Config::from_toml_str_with(&text, None, &lookup).map_err(|e| e.to_string())?;
        Ok(config.server("api").unwrap().auth.clone().unwrap())
    }

    #[test]
    fn idle_timeout_default_given_and_refused() {
        let exchange = "mode = \"exchange\"\nissuer = \"https://as.example\"\n\
                        client_id = \"gw\"\nclient_secret_env = \"S\"";
        match auth(exchange).unwrap() {
            DownstreamAuth::Exchange(e) => assert_eq!(e.idle_timeout, super::DEFAULT_IDLE_TIMEOUT),
            other => panic!("{other:?}"),
        }
        match auth(&format!("{exchange}\nidle_timeout = \"90s\"")).unwrap() {
            DownstreamAuth::Exchange(e) => assert_eq!(e.idle_timeout, Duration::from_secs(90)),
            other => panic!("{other:?}"),
        }
        let oauth =
            "mode = \"oauth\"\ncallback = \"http://127.0.0.1:8765/cb\"\nidle_timeout = \"2m\"";
        match auth(oauth).unwrap() {
            DownstreamAuth::OAuth(o) => assert_eq!(o.idle_timeout, Duration::from_secs(120)),
            other => panic!("{other:?}"),
        }
        let err = auth(&format!("{exchange}\nidle_timeout = \"0s\"")).unwrap_err();
        assert!(err.contains("longer than zero"), "{err}");
        let err = auth("mode = \"static\"\nvalue_env = \"S\"\nidle_timeout = \"1m\"").unwrap_err();
        assert!(err.contains("does not apply"), "{err}");
    }
}
