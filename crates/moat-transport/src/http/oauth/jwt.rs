//! ES256 JSON Web Tokens: the key, the compact JWS, the public JWK and its RFC 7638
//! thumbprint. Enough for `private_key_jwt` client assertions (RFC 7523) and DPoP proofs
//! (RFC 9449); nothing here verifies tokens from others.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::DecodePrivateKey as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::AuthError;

/// base64url without padding.
pub(crate) fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `n` random bytes from the thread CSPRNG, base64url-encoded.
pub(crate) fn random_b64url<const N: usize>() -> String {
    let bytes: [u8; N] = rand::random();
    b64url(&bytes)
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A P-256 private key that signs ES256 JWTs. `Debug` never shows the key.
#[derive(Clone)]
pub struct EcKey {
    key: SigningKey,
}

impl fmt::Debug for EcKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EcKey")
            .field("thumbprint", &self.thumbprint())
            .finish_non_exhaustive()
    }
}

impl EcKey {
    /// A fresh random key.
    pub fn generate() -> EcKey {
        loop {
            let bytes: [u8; 32] = rand::random();
            // Zero or ≥ the group order is rejected; the chance is ~2^-32, so loop.
            if let Ok(key) = SigningKey::from_bytes(&bytes.into()) {
                return EcKey { key };
            }
        }
    }

    /// A key from a PEM document: PKCS#8 (`BEGIN PRIVATE KEY`) or SEC1 (`BEGIN EC PRIVATE
    /// KEY`).
    pub fn from_pem(pem: &str) -> Result<EcKey, AuthError> {
        if let Ok(key) = SigningKey::from_pkcs8_pem(pem) {
            return Ok(EcKey { key });
        }
        match p256::SecretKey::from_sec1_pem(pem) {
            Ok(secret) => Ok(EcKey {
                key: SigningKey::from(secret),
            }),
            Err(_) => Err(AuthError::Config(
                "the private key is not a P-256 key in PKCS#8 or SEC1 PEM".into(),
            )),
        }
    }

    /// The public key as a JWK: `{"kty":"EC","crv":"P-256","x":…,"y":…}`.
    pub fn public_jwk(&self) -> Value {
        let (x, y) = self.coordinates();
        json!({ "kty": "EC", "crv": "P-256", "x": x, "y": y })
    }

    /// The RFC 7638 SHA-256 thumbprint of the public JWK, base64url.
    pub fn thumbprint(&self) -> String {
        let (x, y) = self.coordinates();
        // Required members in lexicographic order, no whitespace (RFC 7638 §3.2).
        let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        b64url(&Sha256::digest(canonical.as_bytes()))
    }

    fn coordinates(&self) -> (String, String) {
        let point = self.key.verifying_key().to_encoded_point(false);
        // An uncompressed point always has both coordinates.
        let x = point.x().map(|x| b64url(x)).unwrap_or_default();
        let y = point.y().map(|y| b64url(y)).unwrap_or_default();
        (x, y)
    }

    /// Sign `claims` with `header` (to which `"alg":"ES256"` is added) as a compact JWS.
    pub fn sign(&self, mut header: Value, claims: &Value) -> String {
        if let Value::Object(h) = &mut header {
            h.insert("alg".into(), Value::String("ES256".into()));
        }
        let input = format!(
            "{}.{}",
            b64url(header.to_string().as_bytes()),
            b64url(claims.to_string().as_bytes())
        );
        let signature: Signature = self.key.sign(input.as_bytes());
        format!("{input}.{}", b64url(&signature.to_bytes()))
    }

    /// The verifying key (for tests and for publishing a JWKS).
    pub fn verifying_key(&self) -> p256::ecdsa::VerifyingKey {
        *self.key.verifying_key()
    }
}

/// A `private_key_jwt` client assertion (RFC 7523 §3): `iss` = `sub` = the client id,
/// `aud` = the authorization server's issuer, valid for five minutes.
pub(crate) fn client_assertion(key: &EcKey, client_id: &str, audience: &str) -> String {
    let now = now_secs();
    key.sign(
        json!({ "typ": "JWT" }),
        &json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + 300,
            "jti": random_b64url::<16>(),
        }),
    )
}

/// A DPoP proof (RFC 9449 §4.2) for `method` `htu`, bound to `access_token` when given.
pub(crate) fn dpop_proof(
    key: &EcKey,
    method: &str,
    htu: &str,
    access_token: Option<&str>,
    nonce: Option<&str>,
) -> String {
    let mut claims = json!({
        "jti": random_b64url::<16>(),
        "htm": method,
        "htu": htu,
        "iat": now_secs(),
    });
    if let Value::Object(c) = &mut claims {
        if let Some(token) = access_token {
            c.insert(
                "ath".into(),
                Value::String(b64url(&Sha256::digest(token.as_bytes()))),
            );
        }
        if let Some(nonce) = nonce {
            c.insert("nonce".into(), Value::String(nonce.into()));
        }
    }
    key.sign(
        json!({ "typ": "dpop+jwt", "jwk": key.public_jwk() }),
        &claims,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use p256::ecdsa::signature::Verifier as _;

    fn decode(part: &str) -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn signs_verifiable_es256() {
        let key = EcKey::generate();
        let jwt = client_assertion(&key, "cid", "https://as.example");
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header = decode(parts[0]);
        assert_eq!(header["alg"], "ES256");
        let claims = decode(parts[1]);
        assert_eq!(claims["iss"], "cid");
        assert_eq!(claims["sub"], "cid");
        assert_eq!(claims["aud"], "https://as.example");
        assert!(claims["exp"].as_u64().unwrap() > claims["iat"].as_u64().unwrap());
        assert!(claims["jti"].is_string());
        let sig = Signature::from_slice(&URL_SAFE_NO_PAD.decode(parts[2]).unwrap()).unwrap();
        key.verifying_key()
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
            .unwrap();
    }

    #[test]
    fn dpop_proof_shape() {
        let key = EcKey::generate();
        let p = dpop_proof(&key, "POST", "https://rs/mcp", Some("tok"), Some("n1"));
        let parts: Vec<&str> = p.split('.').collect();
        let header = decode(parts[0]);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["jwk"]["kty"], "EC");
        assert!(header["jwk"].get("d").is_none());
        let claims = decode(parts[1]);
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://rs/mcp");
        assert_eq!(claims["nonce"], "n1");
        assert_eq!(claims["ath"], b64url(&Sha256::digest(b"tok")));
        let q = dpop_proof(&key, "POST", "https://rs/mcp", None, None);
        assert_ne!(decode(q.split('.').nth(1).unwrap())["jti"], claims["jti"]);
    }

    #[test]
    fn thumbprint_matches_rfc9449_example() {
        // The public key of RFC 9449 §4.1's example proof and the `jkt` of §6.1.
        let x = "l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs";
        let y = "9VE4jf_Ok_o64zbTTlcuNJajHmt6v9TDVrU0CdvGRDA";
        let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        assert_eq!(
            b64url(&Sha256::digest(canonical.as_bytes())),
            "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"
        );
        // And our own keys produce the same construction.
        let key = EcKey::generate();
        let jwk = key.public_jwk();
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            jwk["x"].as_str().unwrap(),
            jwk["y"].as_str().unwrap()
        );
        assert_eq!(
            key.thumbprint(),
            b64url(&Sha256::digest(canonical.as_bytes()))
        );
    }

    #[test]
    fn pem_round_trip() {
        use p256::pkcs8::EncodePrivateKey as _;
        let key = EcKey::generate();
        let pem = key
            .key
            .to_pkcs8_pem(p256::pkcs8::LineEnding::LF)
            .unwrap()
            .to_string();
        let back = EcKey::from_pem(&pem).unwrap();
        assert_eq!(back.thumbprint(), key.thumbprint());
        assert!(
            EcKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
                .is_err()
        );
        assert!(!format!("{key:?}").contains(&pem));
    }
}
