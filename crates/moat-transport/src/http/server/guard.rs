//! The checks every HTTP request passes before it reaches MCP: `Host` and `Origin` against
//! an allow-list (DNS rebinding), and the bearer token, compared in constant time.

use http::HeaderMap;
use http::header::{AUTHORIZATION, HOST, ORIGIN};
use subtle::ConstantTimeEq;

/// Who may talk to the server.
#[derive(Debug, Clone, Default)]
pub(crate) struct Guard {
    /// Host names (without port) accepted in `Host` and in `Origin`; empty: any.
    pub hosts: Vec<String>,
    /// Origins accepted besides those whose host is in `hosts` (e.g. `https://app.example`).
    pub origins: Vec<String>,
    /// The bearer token every request must carry, if any.
    pub token: Option<String>,
}

/// Why a request was refused before it reached MCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 403: a `Host` or `Origin` not on the allow-list.
    Forbidden(String),
    /// 401: no bearer token, or the wrong one.
    Unauthorized { message: String, challenge: String },
}

impl Guard {
    pub(crate) fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        if !self.hosts.is_empty() {
            let host = headers
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .ok_or_else(|| Refusal::Forbidden("Forbidden: missing Host header".into()))?;
            if !self.host_allowed(crate::http::headers::host_name(host)) {
                return Err(Refusal::Forbidden(format!(
                    "Forbidden: Host {host:?} is not allowed (DNS rebinding protection); \
                     allow it with --allow-host"
                )));
            }
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !self.origin_allowed(origin) {
                return Err(Refusal::Forbidden(format!(
                    "Forbidden: Origin {origin:?} is not allowed (DNS rebinding protection); \
                     allow it with --allow-origin"
                )));
            }
        }
        if let Some(token) = &self.token {
            let presented = headers
                .get(AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| {
                    let (scheme, rest) = h.split_once(' ')?;
                    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
                });
            match presented {
                None => {
                    return Err(Refusal::Unauthorized {
                        message: "Unauthorized: this server needs a bearer token \
                                  (Authorization: Bearer <token>)"
                            .into(),
                        challenge: r#"Bearer realm="mcp""#.into(),
                    });
                }
                Some(p) if !bool::from(p.as_bytes().ct_eq(token.as_bytes())) => {
                    return Err(Refusal::Unauthorized {
                        message: "Unauthorized: the bearer token is not valid".into(),
                        challenge: r#"Bearer realm="mcp", error="invalid_token""#.into(),
                    });
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        if self
            .origins
            .iter()
            .any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
        {
            return true;
        }
        let Some(rest) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            return false;
        };
        // With no host allow-list (bound off loopback, token required), a browser origin
        // must still be named explicitly.
        !self.hosts.is_empty() && self.host_allowed(crate::http::headers::host_name(rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        map
    }

    fn local() -> Guard {
        Guard {
            hosts: vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()],
            ..Guard::default()
        }
    }

    #[test]
    fn loopback_hosts_and_origins_pass() {
        let g = local();
        assert!(g.check(&headers(&[("host", "127.0.0.1:8080")])).is_ok());
        assert!(g.check(&headers(&[("host", "[::1]:80")])).is_ok());
        assert!(
            g.check(&headers(&[
                ("host", "localhost"),
                ("origin", "http://localhost:3000")
            ]))
            .is_ok()
        );
    }

    #[test]
    fn rebinding_is_refused() {
        let g = local();
        assert!(matches!(
            g.check(&headers(&[("host", "evil.example")])),
            Err(Refusal::Forbidden(_))
        ));
        assert!(matches!(
            g.check(&headers(&[
                ("host", "localhost"),
                ("origin", "http://evil.example")
            ])),
            Err(Refusal::Forbidden(_))
        ));
        assert!(matches!(g.check(&headers(&[])), Err(Refusal::Forbidden(_))));
        assert!(matches!(
            g.check(&headers(&[("host", "localhost"), ("origin", "null")])),
            Err(Refusal::Forbidden(_))
        ));
    }

    #[test]
    fn bearer_tokens_are_checked() {
        let g = Guard {
            token: Some("s3cret".into()),
            ..local()
        };
        let ok = headers(&[("host", "localhost"), ("authorization", "Bearer s3cret")]);
        assert!(g.check(&ok).is_ok());
        for bad in [
            "Bearer nope",
            "Basic s3cret",
            "Bearer s3cre",
            "Bearer s3cret2",
        ] {
            let h = headers(&[("host", "localhost"), ("authorization", bad)]);
            assert!(
                matches!(g.check(&h), Err(Refusal::Unauthorized { .. })),
                "{bad}"
            );
        }
        let none = headers(&[("host", "localhost")]);
        assert!(matches!(g.check(&none), Err(Refusal::Unauthorized { .. })));
    }
}
