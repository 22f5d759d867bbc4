//! The `WWW-Authenticate: Bearer` challenge of a refused request (RFC 6750 §3, with the
//! `resource_metadata` parameter of RFC 9728 §5.1), and the status that goes with it.

use http::StatusCode;

use super::Denial;

/// A refusal ready to send: status, challenge header, and a message for the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Challenge {
    pub status: StatusCode,
    pub header: String,
    pub message: String,
}

/// `s` as a quoted-string: quotes and backslashes escaped, control characters dropped.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars().filter(|c| !c.is_control()) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

impl Challenge {
    pub(super) fn new(denial: &Denial, metadata_url: &str, scopes: &[String]) -> Challenge {
        let mut params = Vec::new();
        let (status, message, scope) = match denial {
            // No token: no error code (RFC 6750 §3.1), just where to learn how to get one.
            Denial::Missing => (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: this server needs an OAuth access token \
                 (Authorization: Bearer <token>)"
                    .to_owned(),
                scopes.join(" "),
            ),
            Denial::Invalid(why) => {
                params.push(format!("error={}", quoted("invalid_token")));
                params.push(format!("error_description={}", quoted(why)));
                (
                    StatusCode::UNAUTHORIZED,
                    format!("Unauthorized: {why}"),
                    scopes.join(" "),
                )
            }
            Denial::InsufficientScope(needed) => {
                params.push(format!("error={}", quoted("insufficient_scope")));
                let needed = needed.join(" ");
                params.push(format!(
                    "error_description={}",
                    quoted(&format!(
                        "the token lacks a scope this server needs: {needed}"
                    ))
                ));
                (
                    StatusCode::FORBIDDEN,
                    format!("Forbidden: the access token needs the scopes {needed:?}"),
                    needed,
                )
            }
        };
        params.insert(0, format!("resource_metadata={}", quoted(metadata_url)));
        if !scope.is_empty() {
            params.push(format!("scope={}", quoted(&scope)));
        }
        Challenge {
            status,
            header: format!("Bearer {}", params.join(", ")),
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const META: &str = "https://mcp.example/.well-known/oauth-protected-resource/mcp";

    #[test]
    fn missing_token_names_no_error() {
        let c = Challenge::new(&Denial::Missing, META, &["a".into()]);
        assert_eq!(c.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            c.header,
            format!(r#"Bearer resource_metadata="{META}", scope="a""#)
        );
    }

    #[test]
    fn invalid_and_insufficient() {
        let c = Challenge::new(&Denial::Invalid("bad \"sig\"".into()), META, &[]);
        assert!(c.header.contains(r#"error="invalid_token""#));
        assert!(c.header.contains(r#"error_description="bad \"sig\"""#));
        let c = Challenge::new(
            &Denial::InsufficientScope(vec!["a".into(), "b".into()]),
            META,
            &["a".into(), "b".into()],
        );
        assert_eq!(c.status, StatusCode::FORBIDDEN);
        assert!(c.header.contains(r#"error="insufficient_scope""#));
        assert!(c.header.contains(r#"scope="a b""#));
    }
}
