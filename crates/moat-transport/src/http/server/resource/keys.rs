//! The issuer's signing keys: found through its metadata (RFC 8414 / OpenID Connect
//! Discovery), fetched from its JWKS, kept, and fetched again when a token names a key not
//! seen yet — at most once per interval, so a flood of made-up `kid`s cannot turn into a
//! flood of fetches. When a fetch fails the keys already held stay in use.
//!
//! No lock is held across a fetch: requests whose keys are held are answered while one
//! request fetches, and requests that need the same fetch wait for it (one at a time)
//! rather than each making their own.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily};
use serde::Deserialize;
use serde_json::Value;
use url::Url;

use super::fetch::{Fetcher, is_secure};
use crate::http::oauth::metadata::server_metadata_urls;

/// What the issuer's metadata says where to find.
#[derive(Debug, Clone, Default)]
struct Endpoints {
    jwks_uri: Option<Url>,
    introspection_endpoint: Option<Url>,
}

#[derive(Debug, Default)]
struct State {
    endpoints: Option<Endpoints>,
    keys: Vec<Jwk>,
    /// When keys were last asked for, whatever came of it.
    last_attempt: Option<Instant>,
    /// When a token naming a key not held last caused a fetch.
    last_refetch: Option<Instant>,
    /// Why the last attempt failed, if it did.
    last_error: Option<String>,
}

pub(super) struct KeyCache {
    fetcher: Fetcher,
    issuer: String,
    issuer_url: Url,
    configured_jwks: Option<Url>,
    interval: Duration,
    state: std::sync::Mutex<State>,
    /// Held by the one request fetching; others that need keys wait here, then look again.
    fetching: tokio::sync::Mutex<()>,
}

fn family_of(jwk: &Jwk) -> AlgorithmFamily {
    match jwk.algorithm {
        AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
        AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa,
        AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
        AlgorithmParameters::OctetKey(_) => AlgorithmFamily::Hmac,
    }
}

/// Whether `jwk` may verify a token signed with `alg` and naming `kid`: a public key of
/// the algorithm's family, with that id, not restricted to another algorithm or use.
pub fn key_fits(jwk: &Jwk, alg: Algorithm, kid: Option<&str>) -> bool {
    let family = family_of(jwk);
    // A symmetric key in a JWKS is never a verification key for anyone else's tokens.
    family != AlgorithmFamily::Hmac
        && family.algorithms().contains(&alg)
        && kid.is_none_or(|kid| jwk.common.key_id.as_deref() == Some(kid))
        && jwk
            .common
            .key_algorithm
            .is_none_or(|a| a.to_string() == format!("{alg:?}"))
        && !matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature)
}

impl KeyCache {
    pub(super) fn new(
        fetcher: Fetcher,
        issuer: String,
        issuer_url: Url,
        configured_jwks: Option<Url>,
        interval: Duration,
    ) -> KeyCache {
        KeyCache {
            fetcher,
            issuer,
            issuer_url,
            configured_jwks,
            interval,
            state: std::sync::Mutex::new(State::default()),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pick(&self, alg: Algorithm, kid: Option<&str>) -> Vec<Jwk> {
        self.state()
            .keys
            .iter()
            .filter(|k| key_fits(k, alg, kid))
            .cloned()
            .collect()
    }

    /// The keys that may verify a token signed with `alg` naming `kid`; fetched again if
    /// none does and the last fetch is old enough.
    pub(super) async fn keys_for(
        &self,
        alg: Algorithm,
        kid: Option<&str>,
    ) -> Result<Vec<Jwk>, String> {
        let found = self.pick(alg, kid);
        if !found.is_empty() {
            return Ok(found);
        }
        let _fetching = self.fetching.lock().await;
        // Whoever held the fetch before may have brought the key.
        let found = self.pick(alg, kid);
        if !found.is_empty() {
            return Ok(found);
        }
        let allowed = self.may_fetch(&mut self.state());
        if allowed {
            self.refresh().await;
            let found = self.pick(alg, kid);
            if !found.is_empty() {
                return Ok(found);
            }
        }
        let state = self.state();
        Err(match (&state.last_error, kid) {
            (Some(e), _) => format!("the issuer's signing keys could not be fetched ({e})"),
            (None, Some(kid)) => format!("the token's key {kid:?} is not one of the issuer's"),
            (None, None) => "no key of the issuer fits the token's algorithm".to_owned(),
        })
    }

    /// The introspection endpoint the issuer's metadata names.
    pub(super) async fn introspection_endpoint(&self) -> Result<Url, String> {
        let known = self.state().endpoints.is_some();
        if !known {
            let _fetching = self.fetching.lock().await;
            let allowed = {
                let mut state = self.state();
                state.endpoints.is_none() && self.may_fetch(&mut state)
            };
            if allowed {
                self.refresh().await;
            }
        }
        let state = self.state();
        match state
            .endpoints
            .as_ref()
            .and_then(|e| e.introspection_endpoint.clone())
        {
            Some(u) => Ok(u),
            None => Err(match &state.last_error {
                Some(e) => format!("the issuer's metadata could not be fetched ({e})"),
                None => "the issuer names no introspection endpoint".to_owned(),
            }),
        }
    }

    /// The first fetch is always allowed; after it, one per interval.
    fn may_fetch(&self, state: &mut State) -> bool {
        if state.last_attempt.is_none() {
            return true;
        }
        if state
            .last_refetch
            .is_none_or(|at| at.elapsed() >= self.interval)
        {
            state.last_refetch = Some(Instant::now());
            return true;
        }
        false
    }

    /// Fetches the keys (and the metadata, the first time), with no lock held meanwhile;
    /// the caller holds `fetching`.
    async fn refresh(&self) {
        let endpoints = {
            let mut state = self.state();
            state.last_attempt = Some(Instant::now());
            state.endpoints.clone()
        };
        let endpoints = match endpoints {
            Some(e) => Ok(e),
            None => self.discover().await,
        };
        let fetched = match &endpoints {
            Ok(e) => self.fetch(e).await,
            Err(e) => Err(e.clone()),
        };
        let mut state = self.state();
        if let Ok(e) = endpoints {
            state.endpoints = Some(e);
        }
        match fetched {
            Ok(keys) => {
                state.keys = keys;
                state.last_error = None;
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, error = %e, "fetching the issuer's keys failed; keeping the keys held");
                state.last_error = Some(e);
            }
        }
    }

    async fn fetch(&self, endpoints: &Endpoints) -> Result<Vec<Jwk>, String> {
        let jwks_uri = match (&self.configured_jwks, Some(endpoints)) {
            (Some(u), _) => u.clone(),
            (
                None,
                Some(Endpoints {
                    jwks_uri: Some(u), ..
                }),
            ) => u.clone(),
            _ => return Err("the issuer's metadata names no jwks_uri".into()),
        };
        #[derive(Deserialize)]
        struct Set {
            keys: Vec<Value>,
        }
        let set: Set = self.fetcher.get_json(&jwks_uri).await?;
        // One key of a kind this library does not know must not hide the others.
        Ok(set
            .keys
            .into_iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k).ok())
            .collect())
    }

    /// The issuer's metadata, at the well-known URIs in the spec's order; the first whose
    /// `issuer` is ours wins. With a configured JWKS URL, failing to find it is no error.
    async fn discover(&self) -> Result<Endpoints, String> {
        let mut errors = Vec::new();
        for url in server_metadata_urls(&self.issuer_url) {
            match self.fetcher.get_json::<Value>(&url).await {
                Ok(doc) if doc["issuer"].as_str() == Some(self.issuer.as_str()) => {
                    let url_of = |k: &str| {
                        doc[k]
                            .as_str()
                            .and_then(|u| Url::parse(u).ok())
                            .filter(is_secure)
                    };
                    return Ok(Endpoints {
                        jwks_uri: url_of("jwks_uri"),
                        introspection_endpoint: url_of("introspection_endpoint"),
                    });
                }
                Ok(_) => errors.push(format!("{url}: the metadata names another issuer")),
                Err(e) => errors.push(e),
            }
        }
        if self.configured_jwks.is_some() {
            return Ok(Endpoints::default());
        }
        Err(errors.join("; "))
    }
}
