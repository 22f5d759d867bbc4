//! Opaque access tokens, asked about at the authorization server (RFC 7662). Active answers
//! are kept for a while — never past the token's `exp`, never more than a set number —
//! keyed by a hash of the token, so the token itself is not held.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use url::Url;

use super::fetch::Fetcher;
use super::{Identity, IntrospectionOptions, ResourceOptions, Trusted, identity_of};

/// Why an introspection did not yield an identity.
#[derive(Debug)]
pub(super) enum Refusal {
    /// This issuer does not know the token as active (or could not be asked): another
    /// issuer may.
    Inactive(String),
    /// This issuer vouches for the token, but it is not usable here (another resource,
    /// expired): no other issuer is asked.
    Final(String),
}

pub(super) struct Introspector {
    fetcher: Fetcher,
    options: IntrospectionOptions,
    endpoint: Option<Url>,
    cache: std::sync::Mutex<HashMap<[u8; 32], (Identity, Instant)>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Whether an `aud` claim (a string or a list) names `resource`.
fn audience_has(aud: Option<&Value>, resource: &str) -> bool {
    match aud {
        Some(Value::String(s)) => s == resource,
        Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(resource)),
        _ => false,
    }
}

/// Whether the introspection answer of `issuer` describes a token usable here now (one
/// of `audiences`); the reason if not.
fn check_answer(
    answer: &Map<String, Value>,
    options: &ResourceOptions,
    issuer: &str,
    audiences: &[String],
    now: u64,
) -> Result<(), String> {
    let skew = options.skew.as_secs();
    if let Some(iss) = answer.get("iss")
        && iss.as_str() != Some(issuer)
    {
        return Err("the access token was issued by another issuer".into());
    }
    if !audiences.iter().any(|a| audience_has(answer.get("aud"), a)) {
        return Err("the access token is for another resource (aud)".into());
    }
    match answer.get("exp").map(Value::as_u64) {
        Some(Some(exp)) if exp + skew < now => return Err("the access token has expired".into()),
        Some(None) => return Err("the access token's \"exp\" is malformed".into()),
        _ => {}
    }
    match answer.get("nbf").map(Value::as_u64) {
        Some(Some(nbf)) if nbf > now + skew => {
            return Err("the access token is not valid yet".into());
        }
        Some(None) => return Err("the access token's \"nbf\" is malformed".into()),
        _ => {}
    }
    Ok(())
}

impl Introspector {
    pub(super) fn new(
        fetcher: Fetcher,
        options: IntrospectionOptions,
        endpoint: Option<Url>,
    ) -> Introspector {
        Introspector {
            fetcher,
            options,
            endpoint,
            cache: std::sync::Mutex::new(HashMap::new()),
        }
    }

    pub(super) async fn check(
        &self,
        token: &str,
        options: &ResourceOptions,
        trusted: &Trusted,
    ) -> Result<Identity, Refusal> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(identity) = self.cached(&key) {
            return Ok(identity);
        }
        let endpoint = match &self.endpoint {
            Some(u) => u.clone(),
            None => trusted
                .keys
                .introspection_endpoint()
                .await
                .map_err(Refusal::Inactive)?,
        };
        let answer: Map<String, Value> = self
            .fetcher
            .post_form_json(
                &endpoint,
                &[("token", token), ("token_type_hint", "access_token")],
                (&self.options.client_id, &self.options.client_secret),
            )
            .await
            .map_err(|e| {
                Refusal::Inactive(format!("the access token could not be introspected ({e})"))
            })?;
        if answer.get("active") != Some(&Value::Bool(true)) {
            return Err(Refusal::Inactive("the access token is not active".into()));
        }
        let now = now_secs();
        check_answer(&answer, options, &trusted.issuer, &trusted.audiences, now)
            .map_err(Refusal::Final)?;
        let identity = identity_of(&answer, options, &trusted.issuer);
        let mut ttl = self.options.cache_ttl;
        if let Some(exp) = answer.get("exp").and_then(Value::as_u64) {
            ttl = ttl.min(Duration::from_secs(exp.saturating_sub(now)));
        }
        self.remember(key, identity.clone(), ttl);
        Ok(identity)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Identity> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(key)
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(identity, _)| identity.clone())
    }

    fn remember(&self, key: [u8; 32], identity: Identity, ttl: Duration) {
        if ttl.is_zero() || self.options.cache_entries == 0 {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if cache.len() >= self.options.cache_entries {
            cache.retain(|_, (_, until)| now < *until);
        }
        if cache.len() >= self.options.cache_entries {
            // Still full of live answers: drop the one that ends soonest.
            if let Some(k) = cache
                .iter()
                .min_by_key(|(_, (_, until))| *until)
                .map(|(k, _)| *k)
            {
                cache.remove(&k);
            }
        }
        cache.insert(key, (identity, now + ttl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn opts() -> ResourceOptions {
        ResourceOptions::new("https://as.example", "https://mcp.example/mcp")
    }

    fn check(v: Value, now: u64) -> Result<(), String> {
        if v["active"] != true {
            return Err("inactive".into());
        }
        let aud = ["https://mcp.example/mcp".to_owned()];
        check_answer(
            v.as_object().unwrap(),
            &opts(),
            "https://as.example",
            &aud,
            now,
        )
    }

    #[test]
    fn answers_are_checked() {
        let aud = "https://mcp.example/mcp";
        assert!(check(json!({"active": true, "aud": aud, "exp": 1000}), 900).is_ok());
        assert!(check(json!({"active": false, "aud": aud}), 900).is_err());
        assert!(check(json!({"active": true, "aud": "https://other"}), 900).is_err());
        assert!(check(json!({"active": true}), 900).is_err());
        assert!(check(json!({"active": true, "aud": [aud], "exp": 100}), 900).is_err());
        assert!(check(json!({"active": true, "aud": aud, "exp": "never"}), 900).is_err());
        assert!(check(json!({"active": true, "aud": aud, "nbf": 5000}), 900).is_err());
        assert!(
            check(
                json!({"active": true, "aud": aud, "iss": "https://evil"}),
                900
            )
            .is_err()
        );
    }

    #[test]
    fn the_cache_stays_bounded() {
        let mut o = IntrospectionOptions::new("rs", "secret");
        o.cache_entries = 2;
        let i = Introspector::new(Fetcher::new(Duration::from_secs(1)).unwrap(), o, None);
        for n in 0..5u8 {
            i.remember(
                [n; 32],
                Identity::default(),
                Duration::from_secs(60 + u64::from(n)),
            );
        }
        assert_eq!(i.cache.lock().unwrap().len(), 2);
        assert!(i.cached(&[4; 32]).is_some());
        assert!(i.cached(&[0; 32]).is_none());
    }
}
