//! Logging in to the console through an OpenID Connect provider (`[console.oidc]`): the
//! authorization code flow with PKCE (S256), `state` and `nonce`; the ID token checked
//! against the provider's JWKS (asymmetric algorithms only), its `iss`, `aud` (our client
//! id), `exp` and `nonce`; then the user and groups read from the configured claims and
//! held against the allow-list.
//!
//! Each flow is bound to the browser that started it by a cookie of its own (`SameSite=Lax`,
//! so it comes back on the provider's redirect), and is spent by its first callback: a
//! callback with a `state` we did not issue to that browser, or one used already (a replayed
//! code), logs nobody in. Anyone who reaches the console can start a sign-in, so the flows
//! held are bounded twice: [`MAX_FLOWS_PER_CLIENT`] for each client address (its own oldest
//! goes first) and [`MAX_FLOWS`] in all (when full, the oldest of the address holding the
//! most goes): one client looping on `/oidc/start` pushes out only its own. The provider's metadata is fetched when first needed and kept;
//! its keys are fetched for each login (logins are rare, and a rotated key is then never
//! missed).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};
use moat::transport::http::server::{SIGNING_ALGORITHMS, key_fits};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::config::console::ConsoleOidc;

/// The cookie binding a flow to its browser.
pub(crate) const FLOW_COOKIE: &str = "moat_console_oidc";
/// The path the provider sends the browser back to.
pub(crate) const CALLBACK_PATH: &str = "/oidc/callback";
/// How long a started sign-in may take.
const FLOW_TTL: Duration = Duration::from_secs(600);
/// At most this many sign-ins wait at once (anyone who reaches the console can start
/// one).
const MAX_FLOWS: usize = 256;
/// At most this many of them started from one client address (an IPv6 /64 counts as one).
const MAX_FLOWS_PER_CLIENT: usize = 8;
/// Each request to the provider gets this long.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock skew allowed on `exp`, `nbf` and `iat`.
const LEEWAY: u64 = 60;
/// The largest answer read from the provider.
const MAX_ANSWER: usize = 256 * 1024;

/// Why a sign-in logged nobody in; each says so in words for the error page.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    /// The provider could not be reached, or answered nonsense.
    #[error("the identity provider could not be used: {0}")]
    Provider(String),
    /// The callback is not one this browser started, or was used already.
    #[error(
        "this sign-in was not started by this browser, was already used, or took too long \
         (state mismatch or replayed callback)"
    )]
    State,
    /// The provider sent the browser back with an error.
    #[error("the identity provider refused the sign-in: {0}")]
    Refused(String),
    /// The ID token did not pass the checks.
    #[error("the identity provider's ID token is not valid: {0}")]
    Token(String),
    /// Signed in, but not someone the console lets in.
    #[error(
        "{0:?} signed in, but is not allowed to use this console (not in [console.oidc] \
         users, nor a member of its groups)"
    )]
    NotAllowed(String),
}

/// Who signed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Login {
    pub(crate) user: String,
    pub(crate) groups: Vec<String>,
}

/// A sign-in under way.
struct Flow {
    /// Who started it ([`client_of`]).
    client: IpAddr,
    binding: String,
    nonce: String,
    verifier: String,
    started: Instant,
}

/// What the provider's discovery document says (the parts used).
#[derive(Debug, Clone, Deserialize)]
struct Metadata {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
    #[serde(default)]
    token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    code_challenge_methods_supported: Option<Vec<String>>,
}

/// The console's side of the provider.
pub(crate) struct Oidc {
    config: ConsoleOidc,
    redirect_uri: String,
    http: reqwest::Client,
    metadata: tokio::sync::Mutex<Option<Metadata>>,
    flows: Mutex<HashMap<String, Flow>>,
}

fn random() -> String {
    let mut bytes = [0u8; 32];
    // Without randomness there is no secret state: an empty value never matches (and the
    // flow is refused rather than made guessable).
    if getrandom::fill(&mut bytes).is_err() {
        return String::new();
    }
    b64(&bytes)
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

impl Oidc {
    /// The provider of `config`, sending browsers back to `redirect_uri`.
    pub(crate) fn new(config: ConsoleOidc, redirect_uri: String) -> Oidc {
        let http = reqwest::Client::builder()
            .timeout(HTTP_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Oidc {
            config,
            redirect_uri,
            http,
            metadata: tokio::sync::Mutex::new(None),
            flows: Mutex::new(HashMap::new()),
        }
    }

    /// The path of the redirect URI: where the provider's answer arrives.
    fn callback_path(&self) -> String {
        url::Url::parse(&self.redirect_uri)
            .map(|u| u.path().to_owned())
            .unwrap_or_else(|_| CALLBACK_PATH.to_owned())
    }

    /// Whether a request for `path` is the provider's answer: the redirect URI's path, or
    /// its end from a `/` on (a proxy that serves the console under a prefix strips it).
    /// Another path answering is harmless: a callback needs its flow's state and cookie.
    pub(crate) fn is_callback(&self, path: &str) -> bool {
        let callback = self.callback_path();
        path == callback || (path.starts_with('/') && path.len() > 1 && callback.ends_with(path))
    }

    /// Whether the browser reaches the console over https (the redirect URI says so, as the
    /// provider sends it there): its cookies then carry `Secure`.
    pub(crate) fn secure(&self) -> bool {
        url::Url::parse(&self.redirect_uri).is_ok_and(|u| u.scheme() == "https")
    }

    /// What the sign-in button calls the provider.
    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        url: &str,
    ) -> Result<T, LoginError> {
        let answer = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| LoginError::Provider(format!("{what} at {url}: {e}")))?;
        read_json(what, url, answer).await
    }

    /// The provider's metadata, fetched once it answers.
    async fn metadata(&self) -> Result<Metadata, LoginError> {
        let mut held = self.metadata.lock().await;
        if let Some(m) = held.as_ref() {
            return Ok(m.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let m: Metadata = self.get_json("its discovery document", &url).await?;
        if m.issuer != self.config.issuer {
            return Err(LoginError::Provider(format!(
                "its discovery document names the issuer {:?}, not {:?}",
                m.issuer, self.config.issuer
            )));
        }
        if m.code_challenge_methods_supported
            .as_ref()
            .is_some_and(|methods| !methods.iter().any(|x| x == "S256"))
        {
            return Err(LoginError::Provider(
                "it does not support PKCE with S256".into(),
            ));
        }
        *held = Some(m.clone());
        Ok(m)
    }

    /// Starts a sign-in for the browser at `peer`: the provider's authorization URL to send
    /// the browser to, and the value of the cookie that binds the flow to that browser.
    pub(crate) async fn start(&self, peer: IpAddr) -> Result<(String, String), LoginError> {
        let metadata = self.metadata().await?;
        let (state, binding, nonce, verifier) = (random(), random(), random(), random());
        if state.is_empty() {
            return Err(LoginError::Provider(
                "the system's randomness is unavailable".into(),
            ));
        }
        let challenge = b64(&Sha256::digest(verifier.as_bytes()));
        let mut url = url::Url::parse(&metadata.authorization_endpoint).map_err(|e| {
            LoginError::Provider(format!(
                "its authorization endpoint {:?} is not a URL: {e}",
                metadata.authorization_endpoint
            ))
        })?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", &self.redirect_uri)
            .append_pair("scope", &self.config.scopes.join(" "))
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        let mut flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        admit(
            &mut flows,
            state,
            Flow {
                client: client_of(peer),
                binding: binding.clone(),
                nonce,
                verifier,
                started: Instant::now(),
            },
        );
        Ok((url.to_string(), binding))
    }

    /// Finishes a sign-in from the callback's query and the browser's flow cookie: the flow
    /// is spent whatever comes of it. `admits(user, groups)` is the allow-list in force (a
    /// configuration reload may have changed it since the console started).
    pub(crate) async fn finish(
        &self,
        query: &[(String, String)],
        binding: Option<&str>,
        admits: impl Fn(&str, &[String]) -> bool,
    ) -> Result<Login, LoginError> {
        let param = |name: &str| {
            query
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let flow = {
            let mut flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
            let state = param("state").unwrap_or("");
            // The flow is spent only by its own browser: a stranger's callback with a
            // stolen state does not cancel it.
            match flows.get(state) {
                Some(f)
                    if binding.is_some_and(|b| same(f.binding.as_bytes(), b.as_bytes()))
                        && f.started.elapsed() < FLOW_TTL =>
                {
                    flows.remove(state)
                }
                _ => None,
            }
        }
        .ok_or(LoginError::State)?;
        if let Some(iss) = param("iss")
            && iss != self.config.issuer
        {
            return Err(LoginError::Refused(format!(
                "the answer came from {iss:?}, not {:?} (RFC 9207)",
                self.config.issuer
            )));
        }
        if let Some(error) = param("error") {
            let text = param("error_description").unwrap_or("");
            return Err(LoginError::Refused(clip(&format!("{error} {text}"))));
        }
        let code = param("code")
            .filter(|c| !c.is_empty())
            .ok_or_else(|| LoginError::Refused("the answer carries no code".into()))?;
        let metadata = self.metadata().await?;
        let id_token = self.redeem(&metadata, code, &flow.verifier).await?;
        let keys: JwkSet = self
            .get_json("its signing keys (JWKS)", &metadata.jwks_uri)
            .await?;
        let claims = validate_id_token(
            &id_token,
            &keys,
            &self.config.issuer,
            &self.config.client_id,
            &flow.nonce,
        )?;
        let user = claims
            .get(&self.config.user_claim)
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                LoginError::Token(format!(
                    "it has no {:?} claim naming the user",
                    self.config.user_claim
                ))
            })?
            .to_owned();
        let groups: Vec<String> = match claims.get(&self.config.groups_claim) {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        if !admits(&user, &groups) {
            tracing::warn!(%user, ?groups, "console: signed in but not allowed");
            return Err(LoginError::NotAllowed(user));
        }
        tracing::info!(%user, issuer = %self.config.issuer, "console: signed in");
        Ok(Login { user, groups })
    }

    /// The code for tokens at the token endpoint; the ID token.
    async fn redeem(
        &self,
        metadata: &Metadata,
        code: &str,
        verifier: &str,
    ) -> Result<String, LoginError> {
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", &self.redirect_uri),
            ("code_verifier", verifier),
        ];
        let mut request = self.http.post(&metadata.token_endpoint);
        match &self.config.client_secret {
            // client_secret_basic unless the provider takes only client_secret_post.
            Some(secret)
                if metadata
                    .token_endpoint_auth_methods_supported
                    .as_ref()
                    .is_some_and(|m| {
                        m.iter().any(|x| x == "client_secret_post")
                            && !m.iter().any(|x| x == "client_secret_basic")
                    }) =>
            {
                form.push(("client_id", &self.config.client_id));
                form.push(("client_secret", secret));
            }
            Some(secret) => {
                request = request.basic_auth(
                    form_encode(&self.config.client_id),
                    Some(form_encode(secret)),
                );
            }
            None => form.push(("client_id", &self.config.client_id)),
        }
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let answer = request
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
            .send()
            .await
            .map_err(|e| {
                LoginError::Provider(format!(
                    "its token endpoint {}: {e}",
                    metadata.token_endpoint
                ))
            })?;
        let status = answer.status();
        let tokens: Value = read_json_any(answer).await.map_err(|e| {
            LoginError::Provider(format!(
                "its token endpoint {}: {e}",
                metadata.token_endpoint
            ))
        })?;
        if !status.is_success() {
            let error = tokens["error"].as_str().unwrap_or("error");
            let text = tokens["error_description"].as_str().unwrap_or("");
            return Err(LoginError::Refused(clip(&format!(
                "the token endpoint answered {status}: {error} {text}"
            ))));
        }
        tokens["id_token"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| LoginError::Token("the token endpoint returned no ID token".into()))
    }
}

/// The address a flow counts against: an IPv4 address (also when mapped into IPv6), or an
/// IPv6 address's /64, which one host usually holds whole.
fn client_of(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !((1u128 << 64) - 1),
            )),
        },
    }
}

/// Holds `flow` under `state`, dropping expired flows, then the client's own oldest when it
/// has its share, else, when all are taken, the oldest of the client holding the most.
fn admit(flows: &mut HashMap<String, Flow>, state: String, flow: Flow) {
    flows.retain(|_, f| f.started.elapsed() < FLOW_TTL);
    let oldest_of = |flows: &HashMap<String, Flow>, client: IpAddr| {
        flows
            .iter()
            .filter(|(_, f)| f.client == client)
            .min_by_key(|(_, f)| f.started)
            .map(|(k, _)| k.clone())
    };
    let mut counts: HashMap<IpAddr, usize> = HashMap::new();
    for f in flows.values() {
        *counts.entry(f.client).or_default() += 1;
    }
    let victim = if counts.get(&flow.client).copied().unwrap_or(0) >= MAX_FLOWS_PER_CLIENT {
        oldest_of(flows, flow.client)
    } else if flows.len() >= MAX_FLOWS {
        // The oldest flow of the addresses holding the most (among equals, whichever
        // started first, so the choice does not depend on the map's order).
        let most = counts.values().copied().max().unwrap_or(0);
        flows
            .iter()
            .filter(|(_, f)| counts.get(&f.client) == Some(&most))
            .min_by_key(|(_, f)| f.started)
            .map(|(k, _)| k.clone())
    } else {
        None
    };
    if let Some(victim) = victim {
        flows.remove(&victim);
    }
    flows.insert(state, flow);
}

async fn read_json_any(answer: reqwest::Response) -> Result<Value, String> {
    if answer
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER as u64)
    {
        return Err("the answer is too large".into());
    }
    let bytes = answer.bytes().await.map_err(|e| e.to_string())?;
    if bytes.len() > MAX_ANSWER {
        return Err("the answer is too large".into());
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))
}

async fn read_json<T: serde::de::DeserializeOwned>(
    what: &str,
    url: &str,
    answer: reqwest::Response,
) -> Result<T, LoginError> {
    let status = answer.status();
    if !status.is_success() {
        return Err(LoginError::Provider(format!(
            "{what} at {url} answered {status}"
        )));
    }
    let value = read_json_any(answer)
        .await
        .map_err(|e| LoginError::Provider(format!("{what} at {url}: {e}")))?;
    serde_json::from_value(value)
        .map_err(|e| LoginError::Provider(format!("{what} at {url} is malformed: {e}")))
}

/// Provider-controlled text, shortened before it lands on a page.
fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Checks an ID token (OpenID Connect Core 3.1.3.7): signed by one of `keys` with an
/// asymmetric algorithm, issued by `issuer` for `client_id` (and, if it names an
/// authorized party, that is us), not expired, and carrying our `nonce`. Its claims.
pub(crate) fn validate_id_token(
    token: &str,
    keys: &JwkSet,
    issuer: &str,
    client_id: &str,
    nonce: &str,
) -> Result<Map<String, Value>, LoginError> {
    let bad = |why: &str| LoginError::Token(why.to_owned());
    let header = jsonwebtoken::decode_header(token)
        .map_err(|_| bad("its header is malformed or names an algorithm not accepted"))?;
    // Only asymmetric algorithms, the resource server's list: an HMAC "signature" keyed
    // with something public must never verify.
    if !SIGNING_ALGORITHMS.contains(&header.alg) {
        return Err(LoginError::Token(format!(
            "it is signed with {:?}, which is not accepted",
            header.alg
        )));
    }
    let mut validation = Validation::new(header.alg);
    validation.algorithms = vec![header.alg];
    validation.set_issuer(&[issuer]);
    validation.set_audience(&[client_id]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.leeway = LEEWAY;
    let mut last = bad("its signature does not verify with the provider's keys");
    let mut claims = None;
    for jwk in keys
        .keys
        .iter()
        .filter(|k| key_fits(k, header.alg, header.kid.as_deref()))
    {
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        match jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation) {
            Ok(data) => {
                claims = Some(data.claims);
                break;
            }
            Err(e) => {
                use jsonwebtoken::errors::ErrorKind;
                last = LoginError::Token(match e.kind() {
                    ErrorKind::InvalidSignature => {
                        "its signature does not verify with the provider's keys".into()
                    }
                    ErrorKind::ExpiredSignature => "it has expired".into(),
                    ErrorKind::ImmatureSignature => "it is not valid yet".into(),
                    ErrorKind::InvalidIssuer => format!("it was not issued by {issuer:?}"),
                    ErrorKind::InvalidAudience => {
                        format!("it is not for this console's client {client_id:?} (aud)")
                    }
                    ErrorKind::MissingRequiredClaim(c) => format!("it has no {c:?} claim"),
                    _ => "it is malformed".into(),
                });
                if !matches!(e.kind(), ErrorKind::InvalidSignature) {
                    return Err(last);
                }
            }
        }
    }
    let claims = claims.ok_or(last)?;
    if let Some(azp) = claims.get("azp")
        && azp.as_str() != Some(client_id)
    {
        return Err(bad("it was issued to another client (azp)"));
    }
    let presented = claims.get("nonce").and_then(Value::as_str).unwrap_or("");
    if !same(presented.as_bytes(), nonce.as_bytes()) {
        return Err(bad(
            "its nonce is not the one this sign-in sent (a replayed token?)",
        ));
    }
    Ok(claims)
}

/// Compares in time independent of where the first difference is; empty never matches.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.is_empty() || a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    use serde_json::json;

    /// An Ed25519 key pair: the signing key, and the JWKS publishing its public half.
    fn keys(seed: u8, kid: &str) -> (EncodingKey, JwkSet) {
        let secret = [seed; 32];
        let public = ed25519_dalek::SigningKey::from_bytes(&secret)
            .verifying_key()
            .to_bytes();
        // PKCS#8 v1 for Ed25519: a fixed prefix, then the seed.
        let mut der = vec![
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ];
        der.extend_from_slice(&secret);
        let jwks = serde_json::from_value(json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "x": b64(&public), "kid": kid, "use": "sig", "alg": "EdDSA",
        }]}))
        .unwrap();
        (EncodingKey::from_ed_der(&der), jwks)
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    fn sign(key: &EncodingKey, kid: &str, claims: Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, &claims, key).unwrap()
    }

    fn good() -> Value {
        json!({"iss": "https://idp", "aud": "console", "sub": "alice", "nonce": "n1",
               "exp": now() + 300, "iat": now()})
    }

    fn check(token: &str, jwks: &JwkSet) -> Result<Map<String, Value>, LoginError> {
        validate_id_token(token, jwks, "https://idp", "console", "n1")
    }

    #[test]
    fn a_good_id_token_passes_and_each_defect_is_refused() {
        let (key, jwks) = keys(7, "k1");
        let claims = check(&sign(&key, "k1", good()), &jwks).unwrap();
        assert_eq!(claims["sub"], "alice");

        let refused = |claims: Value, needle: &str| {
            let e = check(&sign(&key, "k1", claims), &jwks).unwrap_err();
            assert!(e.to_string().contains(needle), "{needle}: {e}");
        };
        let mut c = good();
        c["exp"] = json!(now() - 3600);
        refused(c, "expired");
        let mut c = good();
        c["nonce"] = json!("n2");
        refused(c, "nonce");
        let mut c = good();
        c.as_object_mut().unwrap().remove("nonce");
        refused(c, "nonce");
        let mut c = good();
        c["aud"] = json!("someone-else");
        refused(c, "aud");
        let mut c = good();
        c["iss"] = json!("https://evil");
        refused(c, "issued by");
        let mut c = good();
        c["azp"] = json!("someone-else");
        refused(c, "azp");

        // Another key, even under the same kid, does not verify.
        let (other, _) = keys(9, "k1");
        let e = check(&sign(&other, "k1", good()), &jwks).unwrap_err();
        assert!(e.to_string().contains("signature"), "{e}");
        // HMAC is never accepted.
        let hs = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &good(),
            &EncodingKey::from_secret(b"public"),
        )
        .unwrap();
        assert!(check(&hs, &jwks).is_err());
        assert!(check("not.a.jwt", &jwks).is_err());
    }

    fn oidc() -> Oidc {
        let text = "[console.oidc]\nissuer = \"http://127.0.0.1:1\"\nclient_id = \"console\"\n\
                    users = [\"alice\"]\n";
        let config = crate::config::Config::from_toml_str(text, None).unwrap();
        Oidc::new(
            config.console.oidc.unwrap(),
            "http://127.0.0.1:1/oidc/callback".into(),
        )
    }

    fn flow(oidc: &Oidc, state: &str, binding: &str) {
        oidc.flows.lock().unwrap().insert(
            state.into(),
            Flow {
                client: IpAddr::from([127, 0, 0, 1]),
                binding: binding.into(),
                nonce: "n".into(),
                verifier: "v".into(),
                started: Instant::now(),
            },
        );
    }

    #[tokio::test]
    async fn a_callback_needs_its_state_and_its_browser_and_works_once() {
        let oidc = oidc();
        flow(&oidc, "s1", "b1");
        let q = |state: &str| {
            vec![
                ("state".to_owned(), state.to_owned()),
                ("error".to_owned(), "access_denied".to_owned()),
            ]
        };
        // A wrong state, or the right one from another browser: refused, the flow kept.
        assert!(matches!(
            oidc.finish(&q("s2"), Some("b1"), |_, _| true).await,
            Err(LoginError::State)
        ));
        assert!(matches!(
            oidc.finish(&q("s1"), Some("b2"), |_, _| true).await,
            Err(LoginError::State)
        ));
        assert!(matches!(
            oidc.finish(&q("s1"), None, |_, _| true).await,
            Err(LoginError::State)
        ));
        // Its own browser: spent (here refused by the provider's error), then gone.
        assert!(matches!(
            oidc.finish(&q("s1"), Some("b1"), |_, _| true).await,
            Err(LoginError::Refused(_))
        ));
        assert!(matches!(
            oidc.finish(&q("s1"), Some("b1"), |_, _| true).await,
            Err(LoginError::State)
        ));
    }

    #[tokio::test]
    async fn a_provider_that_is_down_is_said_so() {
        let oidc = oidc();
        let e = oidc.start(IpAddr::from([127, 0, 0, 1])).await.unwrap_err();
        assert!(matches!(e, LoginError::Provider(_)), "{e}");
    }

    /// An `Oidc` whose provider's metadata is already known (no network needed to start).
    async fn known() -> Oidc {
        let oidc = oidc();
        *oidc.metadata.lock().await = Some(Metadata {
            issuer: "http://127.0.0.1:1".into(),
            authorization_endpoint: "http://127.0.0.1:1/auth".into(),
            token_endpoint: "http://127.0.0.1:1/token".into(),
            jwks_uri: "http://127.0.0.1:1/jwks".into(),
            token_endpoint_auth_methods_supported: None,
            code_challenge_methods_supported: None,
        });
        oidc
    }

    fn state_of(location: &str) -> String {
        let url = url::Url::parse(location).unwrap();
        url.query_pairs()
            .find(|(k, _)| k == "state")
            .map(|(_, v)| v.into_owned())
            .unwrap()
    }

    #[tokio::test]
    async fn one_client_starting_sign_ins_pushes_out_only_its_own() {
        let oidc = known().await;
        let alice: IpAddr = "192.0.2.1".parse().unwrap();
        let (location, _) = oidc.start(alice).await.unwrap();
        let hers = state_of(&location);
        // A client looping on /oidc/start, from one address and from many in its /64.
        for i in 0..MAX_FLOWS * 2 {
            let v6: IpAddr = format!("2001:db8::{:x}", i + 1).parse().unwrap();
            oidc.start(v6).await.unwrap();
            oidc.start("198.51.100.7".parse().unwrap()).await.unwrap();
        }
        let flows = oidc.flows.lock().unwrap();
        assert!(flows.contains_key(&hers), "alice's sign-in was pushed out");
        assert_eq!(flows.len(), 1 + 2 * MAX_FLOWS_PER_CLIENT);
    }

    #[tokio::test]
    async fn when_all_flows_are_taken_the_busiest_client_gives_way() {
        let oidc = known().await;
        let alice: IpAddr = "192.0.2.1".parse().unwrap();
        let (location, _) = oidc.start(alice).await.unwrap();
        let hers = state_of(&location);
        // Many addresses, each at its share, fill the table; the next start drops one of
        // theirs, not alice's.
        let mut i = 0u32;
        while oidc.flows.lock().unwrap().len() < MAX_FLOWS {
            let peer = IpAddr::from((0x0a00_0000 + i / 8).to_be_bytes());
            oidc.start(peer).await.unwrap();
            i += 1;
        }
        oidc.start("203.0.113.9".parse().unwrap()).await.unwrap();
        let flows = oidc.flows.lock().unwrap();
        assert_eq!(flows.len(), MAX_FLOWS);
        assert!(flows.contains_key(&hers), "alice's sign-in was pushed out");
    }

    #[test]
    fn clients_are_counted_by_address_and_ipv6_by_its_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        assert_eq!(client_of(a), client_of(b));
        assert_ne!(client_of(a), client_of("2001:db8:1:3::1".parse().unwrap()));
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(client_of(mapped), IpAddr::from([192, 0, 2, 1]));
    }
}
