//! What each path of the console answers, after the access checks: the page and its
//! assets, the login link, the identity provider's sign-in and its callback, the JSON the
//! page reads, the event stream, and the actions.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, LOCATION, SET_COOKIE};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::State;
use super::assets;
use super::auth::{COOKIE_NAME, Refusal, Session, cookie};
use super::body::{Body, full, pending_events};
use super::oidc::{FLOW_COOKIE, LoginError};
use super::views;
use crate::consent::Choice;

/// The largest action body read.
const MAX_BODY: usize = 64 * 1024;

const HTML: &str = "text/html; charset=utf-8";
const JSON: &str = "application/json";

/// Answers `req`, which came from `peer`.
pub(crate) async fn handle(
    state: &Arc<State>,
    req: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Body> {
    let mut response = route(state, req, peer).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (
            "content-security-policy",
            "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("x-frame-options", "DENY"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
        .entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn route(state: &Arc<State>, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let action = req.method() == Method::POST;
    if let Err(refusal) = state.auth.check_origin(req.headers(), action) {
        return refused(refusal);
    }
    match (req.method(), path.as_str()) {
        (&Method::GET, "/app.css") => asset("text/css; charset=utf-8", assets::CSS),
        (&Method::GET, "/app.js") => asset("text/javascript; charset=utf-8", assets::JS),
        (&Method::GET, "/login") => login(state, req.uri().query().unwrap_or("")),
        (&Method::GET, "/oidc/start") => oidc_start(state, peer).await,
        (&Method::GET, p) if state.oidc.as_ref().is_some_and(|o| o.is_callback(p)) => {
            oidc_callback(state, &req).await
        }
        (&Method::GET, _) | (&Method::POST, _) => {
            let Some(session) = state.auth.session(req.headers(), admits(state)) else {
                return if path.starts_with("/api/") {
                    refused(Refusal::Unauthorized)
                } else {
                    text(StatusCode::UNAUTHORIZED, HTML, not_logged_in(state))
                };
            };
            if action {
                if let Err(refusal) = state.auth.check_csrf(&session, req.headers()) {
                    return refused(refusal);
                }
                return act(state, &session, &path, req).await;
            }
            read(state, &session, &path, req.uri().query().unwrap_or("")).await
        }
        _ => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET or POST\n".into(),
        ),
    }
}

const NOT_LOGGED_IN: &str = "<p>Not logged in. Open the login link \
the gateway printed when it started (<code>moat gateway --console …</code>, on its \
standard error). Each link works once; restart the gateway for a new one.</p>";

/// A page of its own (no script, no style): a title and `body`, which is markup.
fn page(body: &str) -> String {
    format!(
        "<!doctype html><html lang=en><meta charset=utf-8><title>moat console</title>\
         <h1>moat console</h1>{body}</html>"
    )
}

/// What a browser without a session sees: the sign-in link when there is a provider.
fn not_logged_in(state: &State) -> String {
    let sign_in = state.oidc.as_ref().map_or(String::new(), |o| {
        format!(
            "<p><a id=sign-in href=\"/oidc/start\">Sign in with {}</a></p>",
            escape(o.name())
        )
    });
    page(&format!("{sign_in}{NOT_LOGGED_IN}"))
}

/// The allow-list in force (`[console.oidc]` `users` and `groups` as the last configuration
/// reload left them): whether it lets in a user in some groups. Without `[console.oidc]`
/// any more, nobody signed in through the provider is let in.
fn admits(state: &State) -> impl Fn(&str, &[String]) -> bool + use<> {
    let settings = state.inner.upgrade().map(|inner| inner.settings());
    move |user, groups| {
        let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
        settings
            .as_ref()
            .and_then(|s| s.config.console.oidc.as_ref())
            .is_some_and(|oidc| oidc.allows(user, &refs))
    }
}

/// Text for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// A sign-in that logged nobody in: why, and a way to try again.
fn login_refused(state: &State, status: StatusCode, why: &LoginError) -> Response<Body> {
    let mut response = text(
        status,
        HTML,
        page(&format!(
            "<p id=login-error role=alert>Sign-in failed: {}.</p><p>Nothing was logged in. \
             <a href=\"/oidc/start\">Try again</a>.</p>",
            escape(&why.to_string())
        )),
    );
    clear_flow_cookie(state, &mut response);
    response
}

/// `; Secure` when the console is reached over https ([`super::oidc::Oidc::secure`]).
fn secure_attr(state: &State) -> &'static str {
    if state.oidc.as_ref().is_some_and(|o| o.secure()) {
        "; Secure"
    } else {
        ""
    }
}

/// The flow cookie's attributes. `Path=/`: the callback's path as the browser sees it may
/// differ from the console's own (a redirect URI anywhere, a proxy serving the console
/// under a prefix), and a cookie that does not reach the callback fails every sign-in.
fn flow_cookie(state: &State, value: &str, max_age: u64) -> String {
    format!(
        "{FLOW_COOKIE}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{}",
        secure_attr(state)
    )
}

fn clear_flow_cookie(state: &State, response: &mut Response<Body>) {
    if let Ok(value) = HeaderValue::from_str(&flow_cookie(state, "", 0)) {
        response.headers_mut().append(SET_COOKIE, value);
    }
}

/// `/oidc/start`: to the provider, with this browser's flow bound to a cookie.
async fn oidc_start(state: &Arc<State>, peer: SocketAddr) -> Response<Body> {
    let Some(oidc) = &state.oidc else {
        return error(
            StatusCode::NOT_FOUND,
            "no identity provider is configured ([console.oidc])",
        );
    };
    match oidc.start(peer.ip()).await {
        Ok((location, binding)) => {
            let mut response = Response::new(full(""));
            *response.status_mut() = StatusCode::SEE_OTHER;
            if let Ok(value) = HeaderValue::from_str(&location) {
                response.headers_mut().insert(LOCATION, value);
            }
            // Lax, not Strict: it must come back on the provider's redirect, a navigation
            // from another site.
            if let Ok(value) = HeaderValue::from_str(&flow_cookie(state, &binding, 600)) {
                response.headers_mut().insert(SET_COOKIE, value);
            }
            response
        }
        Err(e) => {
            tracing::warn!(error = %e, "console: sign-in could not start");
            login_refused(state, StatusCode::BAD_GATEWAY, &e)
        }
    }
}

/// The provider's answer: a session for an allowed user, else a page saying why not.
async fn oidc_callback(state: &Arc<State>, req: &Request<Incoming>) -> Response<Body> {
    let Some(oidc) = &state.oidc else {
        return error(StatusCode::NOT_FOUND, "no such page");
    };
    let query = parse_query(req.uri().query().unwrap_or(""));
    let login = match oidc
        .finish(&query, cookie(req.headers(), FLOW_COOKIE), admits(state))
        .await
    {
        Ok(login) => login,
        Err(e) => {
            tracing::warn!(error = %e, "console: sign-in refused");
            let status = match e {
                LoginError::Provider(_) => StatusCode::BAD_GATEWAY,
                _ => StatusCode::FORBIDDEN,
            };
            return login_refused(state, status, &e);
        }
    };
    let session = state.auth.open(Some(login.user), login.groups);
    // A page that moves on to `/` rather than a redirect: after a navigation that came from
    // the provider's site, a browser keeps a `SameSite=Strict` cookie off the rest of the
    // redirect chain, but sends it on a navigation this page starts.
    let mut response = text(
        StatusCode::OK,
        HTML,
        "<!doctype html><html lang=en><meta charset=utf-8><meta http-equiv=refresh \
         content=\"0;url=/\"><title>moat console</title><p>Signed in. \
         <a href=\"/\">Open the console</a>.</p></html>"
            .into(),
    );
    set_session_cookie(&mut response, &session, secure_attr(state));
    clear_flow_cookie(state, &mut response);
    response
}

/// The session cookie: a browser-session cookie (the console ends the session itself,
/// [`super::auth::SESSION_IDLE`], [`super::auth::SESSION_MAX`]); `secure` is `"; Secure"`
/// or nothing.
fn set_session_cookie(response: &mut Response<Body>, session: &Session, secure: &str) {
    let cookie = format!(
        "{COOKIE_NAME}={}; Path=/; HttpOnly; SameSite=Strict{secure}",
        session.id
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(SET_COOKIE, value);
    }
}

fn login(state: &Arc<State>, query: &str) -> Response<Body> {
    let token = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| v)
        .unwrap_or("");
    let Some(session) = state.auth.redeem(token) else {
        return text(
            StatusCode::FORBIDDEN,
            HTML,
            "<!doctype html><html lang=en><meta charset=utf-8><title>moat console</title>\
             <h1>moat console</h1><p>This login link was already used, or is not the \
             gateway's. Each link works once: restart the gateway for a new one.</p></html>"
                .into(),
        );
    };
    let mut response = Response::new(full(""));
    *response.status_mut() = StatusCode::SEE_OTHER;
    response
        .headers_mut()
        .insert(LOCATION, HeaderValue::from_static("/"));
    // Not `Secure` even behind https: the link the gateway prints is plain http, on which a
    // browser would drop such a cookie.
    set_session_cookie(&mut response, &session, "");
    response
}

async fn read(state: &Arc<State>, session: &Session, path: &str, query: &str) -> Response<Body> {
    if path == "/" || path == "/index.html" {
        return text(
            StatusCode::OK,
            HTML,
            assets::INDEX.replace("{{CSRF}}", &session.csrf).replace(
                "{{USER}}",
                &match &session.user {
                    Some(user) => format!("Signed in as {}.", escape(user)),
                    None => "Signed in with the gateway's login link.".to_owned(),
                },
            ),
        );
    }
    if path == "/api/events" {
        let (st, id) = (state.clone(), session.id.clone());
        let still_open = move || st.auth.still_open(&id, admits(&st));
        let mut response = Response::new(pending_events(state, still_open));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        return response;
    }
    let Some(inner) = state.inner.upgrade() else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "the gateway is stopping");
    };
    let body = match path {
        "/api/pending" => json!(state.pending.list()),
        "/api/servers" => views::servers(&inner),
        "/api/tools" => views::tools(&inner),
        "/api/pins" => match views::pins(&inner) {
            Ok(v) => v,
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e),
        },
        "/api/config" => json!({
            "path": inner.settings().config.path.as_ref().map(|p| p.display().to_string()),
            "errors": *state.config_errors.lock().unwrap_or_else(|e| e.into_inner()),
        }),
        "/api/audit" => match views::audit(&inner, &parse_query(query)) {
            Ok(v) => v,
            Err(e) => return error(StatusCode::BAD_REQUEST, &e),
        },
        _ => return error(StatusCode::NOT_FOUND, "no such page"),
    };
    text(StatusCode::OK, JSON, body.to_string())
}

#[derive(Deserialize)]
struct ConsentAction {
    id: u64,
    choice: String,
}

#[derive(Deserialize)]
struct PinAction {
    name: String,
    server_id: String,
    hash: String,
}

async fn act(
    state: &Arc<State>,
    session: &Session,
    path: &str,
    req: Request<Incoming>,
) -> Response<Body> {
    let bytes = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "the request is too large"),
    };
    match path {
        "/api/consent" => {
            let Ok(action) = serde_json::from_slice::<ConsentAction>(&bytes) else {
                return error(StatusCode::BAD_REQUEST, "expected {\"id\", \"choice\"}");
            };
            let choice = match action.choice.as_str() {
                "once" => Choice::Once,
                "session" => Choice::Session,
                "always" => Choice::Always,
                "deny" => Choice::Deny,
                other => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        &format!("unknown choice {other:?} (once, session, always, deny)"),
                    );
                }
            };
            if state
                .pending
                .answer(action.id, choice, session.user.clone())
            {
                text(
                    StatusCode::OK,
                    JSON,
                    json!({"answered": action.id}).to_string(),
                )
            } else {
                error(
                    StatusCode::NOT_FOUND,
                    "that call is no longer waiting (answered elsewhere, timed out, or cancelled)",
                )
            }
        }
        "/api/pins/approve" => {
            let Ok(action) = serde_json::from_slice::<PinAction>(&bytes) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "expected {\"name\", \"server_id\", \"hash\"}",
                );
            };
            let Some(inner) = state.inner.upgrade() else {
                return error(StatusCode::SERVICE_UNAVAILABLE, "the gateway is stopping");
            };
            // What the person approves is what they were shown: the hash must still be
            // the pending one.
            match inner
                .pins()
                .approve_hash_in(&action.name, Some(&action.server_id), &action.hash)
            {
                Ok(approved) => text(
                    StatusCode::OK,
                    JSON,
                    json!({"approved": approved.pin.exposed_name}).to_string(),
                ),
                Err(e) => error(StatusCode::CONFLICT, &e.to_string()),
            }
        }
        _ => error(StatusCode::NOT_FOUND, "no such action"),
    }
}

/// `a=1&b=x%20y` as pairs, percent-decoded (`+` is a space).
fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high * 16 + low);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(digit: u8) -> Option<u8> {
    (digit as char)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

fn asset(content_type: &'static str, body: &'static str) -> Response<Body> {
    let mut response = text(StatusCode::OK, content_type, body.to_owned());
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn text(status: StatusCode, content_type: &str, body: String) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    if let Ok(value) = HeaderValue::from_str(content_type) {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    response
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    text(status, JSON, json!({"error": message}).to_string())
}

fn refused(refusal: Refusal) -> Response<Body> {
    match refusal {
        Refusal::Forbidden(why) => error(StatusCode::FORBIDDEN, &format!("Forbidden: {why}")),
        Refusal::Unauthorized => error(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: log in with the link the gateway printed",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_decoded() {
        assert_eq!(
            parse_query("tool=fs__read%2A&user=a+b&x"),
            vec![
                ("tool".into(), "fs__read*".into()),
                ("user".into(), "a b".into()),
                ("x".into(), String::new()),
            ]
        );
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
    }

    fn state(redirect: Option<&str>) -> State {
        let text = "[console.oidc]\nissuer = \"http://127.0.0.1:1\"\nclient_id = \"console\"\n\
                    users = [\"alice\"]\n";
        let config = crate::config::Config::from_toml_str(text, None).unwrap();
        let oidc = redirect.map(|r| {
            super::super::oidc::Oidc::new(config.console.oidc.clone().unwrap(), r.to_owned())
        });
        State {
            inner: std::sync::Weak::new(),
            auth: super::super::auth::Auth::new("127.0.0.1:4000".parse().unwrap()).0,
            oidc,
            pending: Arc::new(super::super::Pending::new(std::sync::Weak::new())),
            config_errors: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn attributes(cookie: &str) -> Vec<String> {
        cookie
            .split(';')
            .skip(1)
            .map(|a| a.trim().to_owned())
            .collect()
    }

    #[test]
    fn the_flow_cookie_reaches_a_callback_anywhere() {
        for redirect in [
            "http://127.0.0.1:4000/oidc/callback",
            "https://console.example/auth/done",
            "https://proxy.example/moat/oidc/callback",
        ] {
            let cookie = flow_cookie(&state(Some(redirect)), "b", 600);
            assert!(
                attributes(&cookie).contains(&"Path=/".to_owned()),
                "{cookie}"
            );
        }
    }

    #[test]
    fn cookies_are_secure_when_the_console_is_reached_over_https() {
        let https = state(Some("https://console.example/oidc/callback"));
        let http = state(Some("http://127.0.0.1:4000/oidc/callback"));
        let secure = |cookie: &str| attributes(cookie).contains(&"Secure".to_owned());
        assert!(secure(&flow_cookie(&https, "b", 600)));
        assert!(!secure(&flow_cookie(&http, "b", 600)));
        assert!(!secure(&flow_cookie(&state(None), "b", 600)));
        let session = https.auth.open(Some("alice".into()), Vec::new());
        for (state, want) in [(&https, true), (&http, false)] {
            let mut response = Response::new(full(""));
            set_session_cookie(&mut response, &session, secure_attr(state));
            let cookie = response.headers()[SET_COOKIE].to_str().unwrap();
            assert_eq!(secure(cookie), want, "{cookie}");
        }
    }

    #[test]
    fn the_callback_is_its_path_or_what_a_prefix_proxy_forwards() {
        let state = state(Some("https://proxy.example/moat/oidc/callback"));
        let oidc = state.oidc.as_ref().unwrap();
        for path in ["/moat/oidc/callback", "/oidc/callback"] {
            assert!(oidc.is_callback(path), "{path}");
        }
        for path in ["/", "/api/pending", "callback", "/moat", "lback"] {
            assert!(!oidc.is_callback(path), "{path}");
        }
    }

    #[test]
    fn sign_ins_are_held_against_the_current_allow_list() {
        // No gateway (or no [console.oidc] any more): nobody signed in is let in.
        let state = state(Some("http://127.0.0.1:4000/oidc/callback"));
        assert!(!admits(&state)("alice", &[]));
    }
}
