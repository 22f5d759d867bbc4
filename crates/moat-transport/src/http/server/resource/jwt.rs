//! JWT access tokens (RFC 9068): the algorithm against the allow-list, the signature against
//! the issuer's keys, then `iss`, `aud` (this resource, RFC 8707), `exp` and `nbf` with the
//! configured skew. The JOSE work is jsonwebtoken's.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use base64::Engine as _;

use super::{Denial, Identity, ResourceOptions, Trusted, identity_of};

/// The algorithms that may ever be accepted: asymmetric ones only. An HMAC "signature"
/// made with the issuer's public key as the secret must never verify.
pub const SIGNING_ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Three base64url parts: a JWS compact serialization (an opaque token has no dots).
pub(super) fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

/// The `iss` a JWT claims, unverified: it only says which issuer's keys and rules are to
/// check the token, and a lie leads to keys that do not verify it.
pub(super) fn unverified_issuer(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(str::to_owned)
}

fn invalid(why: impl Into<String>) -> Denial {
    Denial::Invalid(why.into())
}

pub(super) async fn validate(
    token: &str,
    options: &ResourceOptions,
    trusted: &Trusted,
) -> Result<Identity, Denial> {
    // `alg: none` and unknown algorithms fail here: the header does not parse.
    let header = jsonwebtoken::decode_header(token).map_err(|_| {
        invalid("the access token's header is malformed or names an algorithm not accepted")
    })?;
    if !options.algorithms.contains(&header.alg) {
        return Err(invalid(format!(
            "the access token is signed with {:?}, which this server does not accept",
            header.alg
        )));
    }
    let candidates = trusted
        .keys
        .keys_for(header.alg, header.kid.as_deref())
        .await
        .map_err(invalid)?;
    let mut validation = Validation::new(header.alg);
    validation.algorithms = vec![header.alg];
    validation.set_issuer(&[&trusted.issuer]);
    validation.set_audience(&trusted.audiences);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.leeway = options.skew.as_secs();
    let mut last = invalid("the access token's signature does not verify");
    for jwk in &candidates {
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        match jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation) {
            Ok(data) => return Ok(identity_of(&data.claims, options, &trusted.issuer)),
            Err(e) => {
                last = invalid(match e.kind() {
                    ErrorKind::InvalidSignature => {
                        "the access token's signature does not verify".to_owned()
                    }
                    ErrorKind::ExpiredSignature => "the access token has expired".to_owned(),
                    ErrorKind::ImmatureSignature => "the access token is not valid yet".to_owned(),
                    ErrorKind::InvalidIssuer => {
                        "the access token was issued by another issuer".to_owned()
                    }
                    ErrorKind::InvalidAudience => {
                        "the access token is for another resource (aud)".to_owned()
                    }
                    ErrorKind::MissingRequiredClaim(c) => {
                        format!("the access token has no {c:?} claim")
                    }
                    ErrorKind::InvalidClaimFormat(c) => {
                        format!("the access token's {c:?} claim is malformed")
                    }
                    _ => "the access token is not valid".to_owned(),
                });
                // Only a signature mismatch may mean another key of the set fits.
                if !matches!(e.kind(), ErrorKind::InvalidSignature) {
                    return Err(last);
                }
            }
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jwt_shape() {
        assert!(looks_like_jwt("a.b.c"));
        assert!(!looks_like_jwt("opaque-token"));
        assert!(!looks_like_jwt("a.b.c.d.e"));
    }

    #[test]
    fn the_claimed_issuer_is_read_unverified() {
        let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let token = format!(
            "{}.{}.sig",
            b64("{}"),
            b64(r#"{"iss":"https://b.example"}"#)
        );
        assert_eq!(
            unverified_issuer(&token).as_deref(),
            Some("https://b.example")
        );
        let token = format!("{}.{}.sig", b64("{}"), b64(r#"{"iss":3}"#));
        assert_eq!(unverified_issuer(&token), None);
        assert_eq!(unverified_issuer("a.%%%.c"), None);
    }

    #[test]
    fn no_hmac_is_ever_allowed() {
        assert!(
            !SIGNING_ALGORITHMS
                .iter()
                .any(|a| matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512))
        );
    }
}
