//! The resource server's calls to the authorization server (metadata, JWKS, introspection):
//! each with a deadline, a bounded body, no redirects followed, and only to `https` URLs or
//! `http` on a loopback host.

use std::net::IpAddr;
use std::time::Duration;

use serde::de::DeserializeOwned;
use url::Url;

/// The largest document accepted from the authorization server.
const MAX_BODY: usize = 256 * 1024;

/// Whether `url` may carry keys or tokens: `https`, or `http` to a loopback host.
pub(super) fn is_secure(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
            None => false,
        },
        _ => false,
    }
}

#[derive(Debug, Clone)]
pub(super) struct Fetcher {
    client: reqwest::Client,
    timeout: Duration,
}

impl Fetcher {
    pub(super) fn new(timeout: Duration) -> Result<Fetcher, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Fetcher { client, timeout })
    }

    /// GET a JSON document; the error is a sentence for logs and challenges.
    pub(super) async fn get_json<T: DeserializeOwned>(&self, url: &Url) -> Result<T, String> {
        let req = self
            .client
            .get(url.clone())
            .header(http::header::ACCEPT, "application/json");
        self.run(url, req).await
    }

    /// POST a form with HTTP Basic client authentication, for a JSON answer.
    pub(super) async fn post_form_json<T: DeserializeOwned>(
        &self,
        url: &Url,
        form: &[(&str, &str)],
        (user, password): (&str, &str),
    ) -> Result<T, String> {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter())
            .finish();
        // RFC 6749 §2.3.1: the client id and secret are form-encoded before Basic.
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let req = self
            .client
            .post(url.clone())
            .basic_auth(enc(user), Some(enc(password)))
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body);
        self.run(url, req).await
    }

    async fn run<T: DeserializeOwned>(
        &self,
        url: &Url,
        req: reqwest::RequestBuilder,
    ) -> Result<T, String> {
        if !is_secure(url) {
            return Err(format!("{url} is not https"));
        }
        let work = async {
            let mut response = req.send().await.map_err(|e| e.without_url().to_string())?;
            let status = response.status();
            let mut body = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| e.without_url().to_string())?
            {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(format!("answer larger than {MAX_BODY} bytes"));
                }
                body.extend_from_slice(&chunk);
            }
            if !status.is_success() {
                return Err(format!("HTTP {}", status.as_u16()));
            }
            serde_json::from_slice(&body).map_err(|e| format!("not the JSON expected: {e}"))
        };
        match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(format!("{}: {e}", strip_query(url))),
            Err(_) => Err(format!("{}: no answer in time", strip_query(url))),
        }
    }
}

/// A URL for messages: no query, no fragment (they may hold secrets).
fn strip_query(url: &Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}
