//! Who may use the console: the one-time login token, the sessions it and the identity
//! provider's sign-in ([`super::oidc`]) open (cookie, CSRF token, the user signed in), and
//! the `Host`/`Origin` checks against DNS rebinding and cross-site requests.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use hyper::HeaderMap;
use hyper::header::{COOKIE, HOST, ORIGIN};

/// The session cookie's name.
pub(crate) const COOKIE_NAME: &str = "moat_console";
/// The header every action carries its session's CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

/// A logged-in browser.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) csrf: String,
    /// Who signed in through the identity provider; `None` for the one-time link (whoever
    /// has the gateway's stderr).
    pub(crate) user: Option<String>,
}

/// The console's access state.
pub(crate) struct Auth {
    /// The login token, until it is used.
    login: Mutex<Option<String>>,
    /// Session id → CSRF token and user.
    sessions: Mutex<HashMap<String, (String, Option<String>)>>,
    /// Host names accepted in `Host` (and as the host of `Origin`).
    hosts: Vec<String>,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 403: the Host or Origin, or a missing CSRF token.
    Forbidden(String),
    /// 401: no session.
    Unauthorized,
}

impl Auth {
    /// The access state of a console bound to `local`, and its login token.
    pub(crate) fn new(local: SocketAddr) -> (Auth, String) {
        let token = random_token();
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .map(String::from)
            .to_vec();
        if !local.ip().is_loopback() && !local.ip().is_unspecified() {
            hosts.push(match local {
                SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
                SocketAddr::V4(v4) => v4.ip().to_string(),
            });
        }
        let auth = Auth {
            login: Mutex::new(Some(token.clone())),
            sessions: Mutex::new(HashMap::new()),
            hosts,
        };
        (auth, token)
    }

    /// Spends the login token if `presented` is it, opening a session.
    pub(crate) fn redeem(&self, presented: &str) -> Option<Session> {
        let mut login = self.login.lock().unwrap_or_else(|e| e.into_inner());
        let matches = login
            .as_deref()
            .is_some_and(|token| same(token.as_bytes(), presented.as_bytes()));
        if !matches {
            return None;
        }
        *login = None;
        Some(self.open(None))
    }

    /// Opens a session for `user` (`None`: the one-time link's).
    pub(crate) fn open(&self, user: Option<String>) -> Session {
        let session = Session {
            id: random_token(),
            csrf: random_token(),
            user,
        };
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                session.id.clone(),
                (session.csrf.clone(), session.user.clone()),
            );
        session
    }

    /// Also answers to `host` (the name in a configured redirect URI, as a TLS proxy in
    /// front of the console forwards it).
    pub(crate) fn allow_host(&mut self, host: &str) {
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            self.hosts.push(host.to_owned());
        }
    }

    /// The session the request's cookie names, if any.
    pub(crate) fn session(&self, headers: &HeaderMap) -> Option<Session> {
        let presented = cookie(headers, COOKIE_NAME)?;
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions
            .iter()
            .find(|(id, _)| same(id.as_bytes(), presented.as_bytes()))
            .map(|(id, (csrf, user))| Session {
                id: id.clone(),
                csrf: csrf.clone(),
                user: user.clone(),
            })
    }

    /// `Host` must name this console (a page of another site resolved to loopback cannot
    /// reach it), and `Origin`, when sent, must be the console's own. Actions (`action`)
    /// must send `Origin`: every browser does on a `POST`.
    pub(crate) fn check_origin(&self, headers: &HeaderMap, action: bool) -> Result<(), Refusal> {
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .ok_or_else(|| Refusal::Forbidden("missing Host header".into()))?;
        if !self.host_allowed(host) {
            return Err(Refusal::Forbidden(format!(
                "Host {host:?} is not this console (DNS rebinding protection)"
            )));
        }
        // `https://` too: a TLS proxy in front of the console keeps the Host it was given.
        match headers.get(ORIGIN).map(|o| o.to_str().unwrap_or("")) {
            Some(origin)
                if !origin.eq_ignore_ascii_case(&format!("http://{host}"))
                    && !origin.eq_ignore_ascii_case(&format!("https://{host}")) =>
            {
                Err(Refusal::Forbidden(format!(
                    "Origin {origin:?} is not this console (cross-site request)"
                )))
            }
            None if action => Err(Refusal::Forbidden(
                "an action must come from the console's page (no Origin header)".into(),
            )),
            _ => Ok(()),
        }
    }

    /// The request carries `session`'s CSRF token.
    pub(crate) fn check_csrf(&self, session: &Session, headers: &HeaderMap) -> Result<(), Refusal> {
        let presented = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if same(session.csrf.as_bytes(), presented.as_bytes()) {
            Ok(())
        } else {
            Err(Refusal::Forbidden(
                "missing or wrong CSRF token (reload the page)".into(),
            ))
        }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let name = moat::transport::http::headers::host_name(host);
        self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
    }
}

/// The value of cookie `name` in the request, if it sent one.
pub(crate) fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.trim())
}

/// 32 random bytes, hex.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    if getrandom::fill(&mut bytes).is_err() {
        // Without the system's randomness nothing here can be secret: no session can be
        // opened with a token nobody can guess, so none is offered.
        return String::new();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares in time independent of where the first difference is. An empty token never
/// matches.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.is_empty() || a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        map
    }

    fn auth() -> (Auth, String) {
        Auth::new("127.0.0.1:4000".parse().unwrap())
    }

    #[test]
    fn the_login_token_works_once() {
        let (auth, token) = auth();
        assert!(auth.redeem("wrong").is_none());
        let session = auth.redeem(&token).expect("first use");
        assert!(auth.redeem(&token).is_none(), "spent");
        let cookie = format!("a=b; {COOKIE_NAME}={}", session.id);
        let found = auth.session(&headers(&[("cookie", &cookie)])).unwrap();
        assert_eq!(found.csrf, session.csrf);
        assert!(
            auth.session(&headers(&[("cookie", "moat_console=x")]))
                .is_none()
        );
        assert!(auth.session(&headers(&[])).is_none());
    }

    #[test]
    fn host_origin_and_csrf_are_checked() {
        let (auth, token) = auth();
        let ok = headers(&[
            ("host", "127.0.0.1:4000"),
            ("origin", "http://127.0.0.1:4000"),
        ]);
        assert!(auth.check_origin(&ok, true).is_ok());
        let get = headers(&[("host", "localhost:4000")]);
        assert!(auth.check_origin(&get, false).is_ok());
        assert!(
            auth.check_origin(&get, true).is_err(),
            "an action needs Origin"
        );
        let rebound = headers(&[("host", "evil.example:4000")]);
        assert!(auth.check_origin(&rebound, false).is_err());
        let cross = headers(&[
            ("host", "127.0.0.1:4000"),
            ("origin", "http://evil.example"),
        ]);
        assert!(auth.check_origin(&cross, false).is_err());
        let session = auth.redeem(&token).unwrap();
        assert!(auth.check_csrf(&session, &headers(&[])).is_err());
        let with = headers(&[(CSRF_HEADER, &session.csrf)]);
        assert!(auth.check_csrf(&session, &with).is_ok());
    }
}
