//! Protected Resource Metadata (RFC 9728) and authorization server metadata (RFC 8414,
//! OpenID Connect Discovery): the documents, where to look for them, and how to check them.

use serde::Deserialize;
use url::Url;

/// OAuth 2.0 Protected Resource Metadata (RFC 9728 §2), the fields MCP uses.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceMetadata {
    /// The resource identifier: the MCP server's canonical URI.
    pub resource: String,
    /// Issuer identifiers of the authorization servers that protect it.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes the resource uses.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// Whether the resource requires DPoP-bound tokens (RFC 9449 §5.2 of RFC 9728 extension).
    #[serde(default)]
    pub dpop_bound_access_tokens_required: Option<bool>,
}

/// Authorization server metadata (RFC 8414 §2 / OpenID Connect Discovery), the fields a
/// client needs.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ServerMetadata {
    /// The issuer identifier.
    pub issuer: String,
    /// Where the user agent is sent for the authorization code grant.
    #[serde(default)]
    pub authorization_endpoint: Option<String>,
    /// Where tokens are requested.
    #[serde(default)]
    pub token_endpoint: Option<String>,
    /// RFC 7591 Dynamic Client Registration endpoint.
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// Scopes the server knows; `offline_access` here allows asking for a refresh token.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// Response types.
    #[serde(default)]
    pub response_types_supported: Option<Vec<String>>,
    /// Grant types (default per RFC 8414: authorization_code and implicit).
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    /// Client authentication methods at the token endpoint (default: client_secret_basic).
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// PKCE methods; absent means no PKCE, and the authorization code grant is refused.
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// RFC 9207: the server puts `iss` in authorization responses.
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: Option<bool>,
    /// Client ID Metadata Documents: URL client ids are accepted.
    #[serde(default)]
    pub client_id_metadata_document_supported: Option<bool>,
    /// RFC 9449: the JWS algorithms accepted in DPoP proofs.
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
}

impl ServerMetadata {
    /// Metadata for a 2025-03-26 server that publishes none: the default endpoints at the
    /// origin (`/authorize`, `/token`, `/register`).
    pub(crate) fn fallback(origin: &Url) -> ServerMetadata {
        let at = |p: &str| origin.join(p).map(|u| u.to_string()).ok();
        ServerMetadata {
            issuer: origin_string(origin),
            authorization_endpoint: at("/authorize"),
            token_endpoint: at("/token"),
            registration_endpoint: at("/register"),
            ..ServerMetadata::default()
        }
    }

    /// Whether `scope` is listed in `scopes_supported`.
    pub fn supports_scope(&self, scope: &str) -> bool {
        self.scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|x| x == scope))
    }

    /// Whether the server advertises PKCE S256.
    pub fn supports_s256(&self) -> bool {
        self.code_challenge_methods_supported
            .as_ref()
            .is_some_and(|m| m.iter().any(|x| x == "S256"))
    }

    /// Whether `grant` is advertised (an absent list counts as "unknown": true).
    pub fn may_support_grant(&self, grant: &str) -> bool {
        self.grant_types_supported
            .as_ref()
            .is_none_or(|g| g.iter().any(|x| x == grant))
    }

    /// Whether DPoP proofs with ES256 are accepted.
    pub fn supports_dpop_es256(&self) -> bool {
        self.dpop_signing_alg_values_supported
            .as_ref()
            .is_some_and(|a| a.iter().any(|x| x == "ES256"))
    }
}

/// `scheme://host[:port]` with no trailing slash.
pub(crate) fn origin_string(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The path of `url` without a trailing slash ("" for the root).
fn trimmed_path(url: &Url) -> &str {
    url.path().trim_end_matches('/')
}

/// Where to look for the Protected Resource Metadata of the MCP server at `server`, in the
/// order the spec gives: path-based well-known URI, then the root one.
pub fn resource_metadata_urls(server: &Url) -> Vec<Url> {
    let origin = origin_string(server);
    let path = trimmed_path(server);
    let mut out = Vec::new();
    if !path.is_empty()
        && let Ok(u) = Url::parse(&format!(
            "{origin}/.well-known/oauth-protected-resource{path}"
        ))
    {
        out.push(u);
    }
    if let Ok(u) = Url::parse(&format!("{origin}/.well-known/oauth-protected-resource")) {
        out.push(u);
    }
    out
}

/// Where to look for the metadata of the authorization server whose issuer is `issuer`, in
/// the spec's order. For an issuer with a path the root document is never tried: it would
/// describe another issuer.
pub fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let origin = origin_string(issuer);
    let path = trimmed_path(issuer);
    let candidates = if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    };
    candidates
        .iter()
        .filter_map(|c| Url::parse(c).ok())
        .collect()
}

/// Whether the resource identifier `resource` (from Protected Resource Metadata) covers the
/// MCP server at `server`: same origin, and its path is a segment-wise prefix of the
/// server's path.
pub fn resource_covers(resource: &str, server: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.fragment().is_some() || r.origin() != server.origin() || !r.origin().is_tuple() {
        return false;
    }
    let rp = trimmed_path(&r);
    let sp = trimmed_path(server);
    rp.is_empty() || sp == rp || sp.starts_with(&format!("{rp}/"))
}

/// The canonical URI of the MCP server (RFC 8707 §2 as the MCP spec uses it): no fragment,
/// no query, no trailing slash at the root. Used as `resource` when there is no metadata.
pub fn canonical_resource(server: &Url) -> String {
    let path = trimmed_path(server);
    format!("{}{}", origin_string(server), path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn prm_urls() {
        let v: Vec<String> = resource_metadata_urls(&u("https://h:8443/public/mcp?x=1"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            v,
            vec![
                "https://h:8443/.well-known/oauth-protected-resource/public/mcp",
                "https://h:8443/.well-known/oauth-protected-resource",
            ]
        );
        let v = resource_metadata_urls(&u("https://h/"));
        assert_eq!(v.len(), 1);
    }

    #[test]
    fn as_urls() {
        let v: Vec<String> = server_metadata_urls(&u("https://a/tenant1"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            v,
            vec![
                "https://a/.well-known/oauth-authorization-server/tenant1",
                "https://a/.well-known/openid-configuration/tenant1",
                "https://a/tenant1/.well-known/openid-configuration",
            ]
        );
        let v: Vec<String> = server_metadata_urls(&u("https://a"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            v,
            vec![
                "https://a/.well-known/oauth-authorization-server",
                "https://a/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn resource_matching() {
        let s = u("http://localhost:3000/mcp");
        assert!(resource_covers("http://localhost:3000/mcp", &s));
        assert!(resource_covers("http://localhost:3000", &s));
        assert!(resource_covers("http://localhost:3000/", &s));
        assert!(resource_covers("HTTP://LOCALHOST:3000/mcp", &s));
        assert!(!resource_covers("https://evil.example.com/mcp", &s));
        assert!(!resource_covers("http://localhost:3001/mcp", &s));
        assert!(!resource_covers("http://localhost:3000/other", &s));
        assert!(!resource_covers("http://localhost:3000/mc", &s));
        assert!(!resource_covers("http://localhost:3000/mcp/sub", &s));
        assert!(!resource_covers("not a url", &s));
        assert!(!resource_covers("http://localhost:3000/mcp#frag", &s));
        assert!(resource_covers(
            "https://h/mcp",
            &u("https://h:443/mcp/messages")
        ));
    }

    #[test]
    fn canonical() {
        assert_eq!(
            canonical_resource(&u("HTTPS://H.example/")),
            "https://h.example"
        );
        assert_eq!(
            canonical_resource(&u("https://h.example:8443/mcp/?q#f")),
            "https://h.example:8443/mcp"
        );
    }
}
