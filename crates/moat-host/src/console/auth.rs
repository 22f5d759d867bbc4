//! Who may use the console: the one-time login token, the sessions it and the identity
//! provider's sign-in ([`super::oidc`]) open (cookie, CSRF token, the user signed in), and
//! the `Host`/`Origin` checks against DNS rebinding and cross-site requests.
//!
//! Sessions end after [`SESSION_IDLE`] without a request, or [`SESSION_MAX`] after they
//! opened, whichever comes first; at most [`MAX_SESSIONS`] are held (opening one more drops
//! the oldest). They are found by the SHA-256 of the cookie's value: a lookup is one hash
//! probe, and the tokens themselves are not kept. A session of the identity provider is
//! held, at each request, against the allow-list then in force (the caller's `admits`): one
//! whose user a configuration reload no longer lets in is closed.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hyper::HeaderMap;
use hyper::header::{COOKIE, HOST, ORIGIN};
use sha2::{Digest, Sha256};

/// The session cookie's name.
pub(crate) const COOKIE_NAME: &str = "moat_console";
/// A session without a request for this long is closed.
pub(crate) const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);
/// A session is closed this long after it opened, however busy.
pub(crate) const SESSION_MAX: Duration = Duration::from_secs(24 * 3600);
/// At most this many sessions are held; opening one more closes the oldest.
pub(crate) const MAX_SESSIONS: usize = 256;
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
    /// Their groups, as the ID token listed them (held against the allow-list again at
    /// each request).
    pub(crate) groups: Vec<String>,
}

/// A session as held: not its token, which is only the key's preimage.
struct Held {
    csrf: String,
    user: Option<String>,
    groups: Vec<String>,
    opened: Instant,
    last_used: Instant,
}

impl Held {
    fn alive(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.opened) < SESSION_MAX
            && now.saturating_duration_since(self.last_used) < SESSION_IDLE
    }
}

/// The map key of a session token.
type Key = [u8; 32];

fn key(token: &str) -> Key {
    Sha256::digest(token.as_bytes()).into()
}

/// The console's access state.
pub(crate) struct Auth {
    /// The login token, until it is used.
    login: Mutex<Option<String>>,
    /// SHA-256 of the session token → the session. The key is a hash of a secret of 256
    /// random bits: looking it up reveals nothing an attacker could use, so no
    /// constant-time comparison is needed.
    sessions: Mutex<HashMap<Key, Held>>,
    /// Host names accepted in `Host` (and as the host of `Origin`).
    hosts: Vec<String>,
}

/// The session held under `k` if it is still open: not expired, and its user (if any)
/// still let in by `admits`. A closed one is removed.
fn open_held<'m>(
    sessions: &'m mut HashMap<Key, Held>,
    k: &Key,
    admits: impl Fn(&str, &[String]) -> bool,
    now: Instant,
) -> Option<&'m mut Held> {
    let held = sessions.get(k)?;
    let admitted = held
        .user
        .as_deref()
        .is_none_or(|user| admits(user, &held.groups));
    if !held.alive(now) || !admitted {
        if !admitted {
            tracing::info!(
                user = held.user.as_deref().unwrap_or(""),
                "console: session closed, the allow-list no longer has its user"
            );
        }
        sessions.remove(k);
        return None;
    }
    sessions.get_mut(k)
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
        Some(self.open(None, Vec::new()))
    }

    /// Opens a session for `user` (`None`: the one-time link's) in `groups`.
    pub(crate) fn open(&self, user: Option<String>, groups: Vec<String>) -> Session {
        self.open_at(user, groups, Instant::now())
    }

    fn open_at(&self, user: Option<String>, groups: Vec<String>, now: Instant) -> Session {
        let session = Session {
            id: random_token(),
            csrf: random_token(),
            user,
            groups,
        };
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        // Opening is rare (a login): the linear sweeps here keep every request's lookup a
        // single probe.
        sessions.retain(|_, held| held.alive(now));
        while sessions.len() >= MAX_SESSIONS {
            let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, held)| held.opened)
                .map(|(k, _)| *k)
            else {
                break;
            };
            sessions.remove(&oldest);
        }
        if !session.id.is_empty() {
            sessions.insert(
                key(&session.id),
                Held {
                    csrf: session.csrf.clone(),
                    user: session.user.clone(),
                    groups: session.groups.clone(),
                    opened: now,
                    last_used: now,
                },
            );
        }
        session
    }

    /// Also answers to `host` (the name in a configured redirect URI, as a TLS proxy in
    /// front of the console forwards it).
    pub(crate) fn allow_host(&mut self, host: &str) {
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            self.hosts.push(host.to_owned());
        }
    }

    /// The session the request's cookie names, if it is still open; a request keeps it from
    /// going idle. `admits(user, groups)` is the allow-list in force: a session of the
    /// identity provider whose user it no longer lets in is closed.
    pub(crate) fn session(
        &self,
        headers: &HeaderMap,
        admits: impl Fn(&str, &[String]) -> bool,
    ) -> Option<Session> {
        self.session_at(headers, admits, Instant::now())
    }

    fn session_at(
        &self,
        headers: &HeaderMap,
        admits: impl Fn(&str, &[String]) -> bool,
        now: Instant,
    ) -> Option<Session> {
        let presented = cookie(headers, COOKIE_NAME).filter(|c| !c.is_empty())?;
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let held = open_held(&mut sessions, &key(presented), admits, now)?;
        held.last_used = now;
        Some(Session {
            id: presented.to_owned(),
            csrf: held.csrf.clone(),
            user: held.user.clone(),
            groups: held.groups.clone(),
        })
    }

    /// Whether the session `id` is still open, by the same rules as [`Auth::session`]
    /// (closing it if not), without counting as a request: what a long-lived response, the
    /// event stream, asks before each thing it sends.
    pub(crate) fn still_open(&self, id: &str, admits: impl Fn(&str, &[String]) -> bool) -> bool {
        self.still_open_at(id, admits, Instant::now())
    }

    fn still_open_at(
        &self,
        id: &str,
        admits: impl Fn(&str, &[String]) -> bool,
        now: Instant,
    ) -> bool {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        open_held(&mut sessions, &key(id), admits, now).is_some()
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
        let found = auth.session(&headers(&[("cookie", &cookie)]), all).unwrap();
        assert_eq!(found.csrf, session.csrf);
        assert!(
            auth.session(&headers(&[("cookie", "moat_console=x")]), all)
                .is_none()
        );
        assert!(
            auth.session(&headers(&[("cookie", "moat_console=")]), all)
                .is_none()
        );
        assert!(auth.session(&headers(&[]), all).is_none());
    }

    fn all(_: &str, _: &[String]) -> bool {
        true
    }

    fn cookie_of(session: &Session) -> HeaderMap {
        headers(&[("cookie", &format!("{COOKIE_NAME}={}", session.id))])
    }

    #[test]
    fn a_session_ends_when_idle_and_at_its_age_limit() {
        let (auth, _) = auth();
        let t0 = Instant::now();
        let hour = Duration::from_secs(3600);
        // Idle: used at 11 h (kept), then nothing for 12 h: closed, and stays closed.
        let idle = auth.open_at(Some("alice".into()), Vec::new(), t0);
        assert!(
            auth.session_at(&cookie_of(&idle), all, t0 + 11 * hour)
                .is_some()
        );
        assert!(
            auth.session_at(&cookie_of(&idle), all, t0 + 22 * hour)
                .is_some()
        );
        assert!(
            auth.session_at(&cookie_of(&idle), all, t0 + 22 * hour + SESSION_IDLE)
                .is_none()
        );
        assert!(
            auth.session_at(&cookie_of(&idle), all, t0).is_none(),
            "removed"
        );
        // Busy: a request every 6 h keeps it from idling, but not past 24 h.
        let busy = auth.open_at(None, Vec::new(), t0);
        for h in [6, 12, 18, 23] {
            assert!(
                auth.session_at(&cookie_of(&busy), all, t0 + h * hour)
                    .is_some()
            );
        }
        assert!(
            auth.session_at(&cookie_of(&busy), all, t0 + SESSION_MAX)
                .is_none()
        );
    }

    #[test]
    fn sessions_are_bounded_and_the_oldest_goes_first() {
        let (auth, _) = auth();
        let t0 = Instant::now();
        let at = |i: usize| t0 + Duration::from_secs(u64::try_from(i).unwrap());
        let first = auth.open_at(None, Vec::new(), at(0));
        let second = auth.open_at(None, Vec::new(), at(1));
        for i in 2..MAX_SESSIONS + 1 {
            auth.open_at(None, Vec::new(), at(i));
        }
        assert_eq!(auth.sessions.lock().unwrap().len(), MAX_SESSIONS);
        let now = at(MAX_SESSIONS + 1);
        assert!(
            auth.session_at(&cookie_of(&first), all, now).is_none(),
            "evicted"
        );
        assert!(auth.session_at(&cookie_of(&second), all, now).is_some());
    }

    #[test]
    fn an_event_stream_asks_whether_its_session_is_still_open_without_using_it() {
        let (auth, token) = auth();
        let t0 = Instant::now();
        let hour = Duration::from_secs(3600);
        let alice = auth.open_at(Some("alice".into()), vec!["ops".into()], t0);
        let in_ops = |_: &str, groups: &[String]| groups.iter().any(|g| g == "ops");
        let nobody = |_: &str, _: &[String]| false;
        assert!(auth.still_open_at(&alice.id, in_ops, t0 + hour));
        assert!(!auth.still_open_at("not-a-session", all, t0));
        // Asking is not a request: a stream open all night does not keep the session.
        for h in 2..12 {
            assert!(auth.still_open_at(&alice.id, in_ops, t0 + h * hour));
        }
        assert!(!auth.still_open_at(&alice.id, in_ops, t0 + SESSION_IDLE));
        assert!(
            auth.session_at(&cookie_of(&alice), all, t0).is_none(),
            "closed for requests too"
        );
        // A reload that drops the user's group closes it at the stream's next question.
        let bob = auth.open_at(Some("bob".into()), vec!["ops".into()], t0);
        assert!(!auth.still_open_at(&bob.id, nobody, t0));
        assert!(auth.session_at(&cookie_of(&bob), all, t0).is_none());
        // The one-time link's session answers to no allow-list.
        let link = auth.redeem(&token).unwrap();
        assert!(auth.still_open(&link.id, nobody));
    }

    #[test]
    fn a_session_the_allow_list_no_longer_admits_is_closed() {
        let (auth, token) = auth();
        let alice = auth.open(Some("alice".into()), vec!["ops".into()]);
        let link = auth.redeem(&token).unwrap();
        let in_ops = |_: &str, groups: &[String]| groups.iter().any(|g| g == "ops");
        let nobody = |_: &str, _: &[String]| false;
        let found = auth.session(&cookie_of(&alice), in_ops).unwrap();
        assert_eq!(found.user.as_deref(), Some("alice"));
        assert_eq!(found.groups, ["ops"]);
        // After a reload that drops `ops`: closed, even if the list comes back.
        assert!(auth.session(&cookie_of(&alice), nobody).is_none());
        assert!(auth.session(&cookie_of(&alice), all).is_none());
        // The one-time link's session is nobody's: no allow-list applies to it.
        assert!(auth.session(&cookie_of(&link), nobody).is_some());
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
