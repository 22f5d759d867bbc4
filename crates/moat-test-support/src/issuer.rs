//! An OAuth authorization server stand-in for the suites: on loopback it serves its
//! metadata (RFC 8414) and a JWKS, and signs EdDSA access tokens for whoever the test
//! names, so a suite can call a moat resource server (an SDK server, `moat serve`,
//! `moat gateway`) as several users. The real authorization server (oidc-provider) is in
//! the suites that need one; this one is small enough to run in any test.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// Two fixed Ed25519 test keys (the private seed, hex) and their public halves (`x`,
/// base64url):
/// signing keys made for these tests and nothing else.
const KEYS: [(&str, &str, &str); 2] = [
    (
        "test-ed-1",
        "6bae0e60d8188412e4a95bda0c0f119a7f8a09e3a97d358ed8ff3ab82460da77",
        "MaYvW-YpkxHRwDrbIWMwC-LkI8o-c4rva6DQH5SHAGw",
    ),
    (
        "test-ed-2",
        "84a7cab84741bfad2d448a5524daa11966cbc3e4e611f5dfbcd62ae8991c53f4",
        "ZH_0zBbYBageUIgI1fb6g5xApz1ANWRhwdoLGBYU7H4",
    ),
];

/// A loopback issuer; it serves until the process ends.
pub struct TestIssuer {
    /// Its issuer identifier (`http://127.0.0.1:PORT`).
    pub url: String,
    /// Which of [`KEYS`] it publishes and signs with (index of the signing one first).
    published: Arc<Mutex<Vec<usize>>>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl TestIssuer {
    /// Start one, publishing and signing with the first key.
    pub fn start() -> TestIssuer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the test issuer");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let published = Arc::new(Mutex::new(vec![0]));
        let (base, keys) = (url.clone(), published.clone());
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (base, keys) = (base.clone(), keys.clone());
                std::thread::spawn(move || serve(tcp, &base, &keys));
            }
        });
        TestIssuer { url, published }
    }

    /// Start one that publishes and signs with the second key alone: an issuer whose keys
    /// are not [`TestIssuer::start`]'s (for tests of several issuers).
    pub fn start_other() -> TestIssuer {
        let issuer = TestIssuer::start();
        *issuer.published.lock().unwrap_or_else(|e| e.into_inner()) = vec![1];
        issuer
    }

    /// Sign with the second key from now on, publishing both (a rotation).
    pub fn rotate(&self) {
        *self.published.lock().unwrap_or_else(|e| e.into_inner()) = vec![1, 0];
    }

    /// A token for `resource`, for user `sub` of client `client`, with `scope`, valid an
    /// hour; `extra` claims are added (e.g. `groups`).
    pub fn token(
        &self,
        resource: &str,
        sub: &str,
        client: &str,
        scope: &str,
        extra: Value,
    ) -> String {
        let mut claims = json!({"iss": self.url, "aud": resource, "sub": sub,
            "client_id": client, "scope": scope, "iat": now(), "exp": now() + 3600});
        if let (Some(c), Value::Object(extra)) = (claims.as_object_mut(), extra) {
            c.extend(extra);
        }
        self.sign(&claims)
    }

    /// `claims` signed with the current key.
    pub fn sign(&self, claims: &Value) -> String {
        let index = self.published.lock().unwrap_or_else(|e| e.into_inner())[0];
        let (kid, seed, _) = KEYS[index];
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid.to_owned());
        header.typ = Some("at+jwt".into());
        let key = EncodingKey::from_ed_der(&pkcs8(seed));
        jsonwebtoken::encode(&header, claims, &key).expect("signing")
    }
}

/// The PKCS#8 DER of an Ed25519 key from its seed: a fixed prefix, then the seed.
fn pkcs8(seed_hex: &str) -> Vec<u8> {
    let mut der = vec![
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    der.extend(
        (0..seed_hex.len())
            .step_by(2)
            .filter_map(|i| u8::from_str_radix(seed_hex.get(i..i + 2).unwrap_or(""), 16).ok()),
    );
    der
}

fn serve(tcp: TcpStream, base: &str, keys: &Mutex<Vec<usize>>) {
    let mut reader = BufReader::new(&tcp);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // The rest of the head: nothing in it matters here.
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(n) if n > 2 => continue,
            _ => break,
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let (status, body) = match path {
        "/.well-known/oauth-authorization-server" | "/.well-known/openid-configuration" => (
            "200 OK",
            json!({"issuer": base, "jwks_uri": format!("{base}/jwks"),
                   "token_endpoint": format!("{base}/token")}),
        ),
        "/jwks" => {
            let held = keys.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let keys: Vec<Value> = held
                .iter()
                .map(|&i| {
                    json!({"kty": "OKP", "crv": "Ed25519", "kid": KEYS[i].0, "use": "sig",
                           "alg": "EdDSA", "x": KEYS[i].2})
                })
                .collect();
            ("200 OK", json!({ "keys": keys }))
        }
        _ => ("404 Not Found", json!({})),
    };
    let body = body.to_string();
    let mut tcp = &tcp;
    let _ = write!(
        tcp,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}
