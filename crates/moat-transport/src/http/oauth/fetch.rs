//! The HTTP calls of the flow: every one with a deadline, a bounded body, no redirects
//! followed, and only to `https` URLs or `http` on a loopback host (unless configured
//! otherwise).

use std::net::IpAddr;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::de::DeserializeOwned;
use url::Url;

use super::AuthError;
use super::user_agent::strip_query;

/// A finished response with its whole (bounded) body.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json<T: DeserializeOwned>(&self, what: &'static str, url: &Url) -> Result<T, AuthError> {
        serde_json::from_slice(&self.body).map_err(|e| AuthError::InvalidResponse {
            what,
            url: strip_query(url),
            detail: e.to_string(),
        })
    }

    /// The OAuth error object of an error response (RFC 6749 §5.2), if the body is one.
    pub fn oauth_error(&self) -> (String, Option<String>) {
        #[derive(serde::Deserialize)]
        struct E {
            error: String,
            error_description: Option<String>,
        }
        match serde_json::from_slice::<E>(&self.body) {
            Ok(e) => (clip(&e.error), e.error_description.as_deref().map(clip)),
            Err(_) => (format!("HTTP {}", self.status.as_u16()), None),
        }
    }
}

/// Server-chosen text for an error message: at most 200 characters, no control characters.
pub(crate) fn clip(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(200).collect()
}

#[derive(Debug, Clone)]
pub(crate) struct Fetcher {
    client: reqwest::Client,
    timeout: Duration,
    max_body: usize,
    allow_insecure: bool,
}

/// Whether `url` may carry credentials: `https`, or `http` to a loopback host.
pub(crate) fn is_secure(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(d)) => {
                d.eq_ignore_ascii_case("localhost")
                    || d.to_ascii_lowercase().ends_with(".localhost")
            }
            Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
            Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
            None => false,
        },
        _ => false,
    }
}

impl Fetcher {
    pub fn new(
        timeout: Duration,
        max_body: usize,
        allow_insecure: bool,
    ) -> Result<Fetcher, AuthError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()
            .map_err(|e| AuthError::Config(format!("HTTP client: {e}")))?;
        Ok(Fetcher {
            client,
            timeout,
            max_body,
            allow_insecure,
        })
    }

    /// Refuse URLs that would carry credentials in the clear.
    pub fn check(&self, url: &Url) -> Result<(), AuthError> {
        if matches!(url.scheme(), "http" | "https") && (self.allow_insecure || is_secure(url)) {
            Ok(())
        } else {
            Err(AuthError::InsecureUrl(strip_query(url)))
        }
    }

    /// GET `url` accepting JSON.
    pub async fn get(&self, what: &'static str, url: &Url) -> Result<Reply, AuthError> {
        self.check(url)?;
        let req = self
            .client
            .get(url.clone())
            .header(http::header::ACCEPT, "application/json");
        self.run(what, url, req).await
    }

    /// POST an `application/x-www-form-urlencoded` body.
    pub async fn post_form(
        &self,
        what: &'static str,
        url: &Url,
        form: &[(&str, &str)],
        headers: Vec<(HeaderName, HeaderValue)>,
    ) -> Result<Reply, AuthError> {
        self.check(url)?;
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form.iter())
            .finish();
        let mut req = self
            .client
            .post(url.clone())
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body);
        for (name, value) in headers {
            req = req.header(name, value);
        }
        self.run(what, url, req).await
    }

    /// POST a JSON body.
    pub async fn post_json(
        &self,
        what: &'static str,
        url: &Url,
        body: &serde_json::Value,
    ) -> Result<Reply, AuthError> {
        self.check(url)?;
        let req = self
            .client
            .post(url.clone())
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        self.run(what, url, req).await
    }

    async fn run(
        &self,
        what: &'static str,
        url: &Url,
        req: reqwest::RequestBuilder,
    ) -> Result<Reply, AuthError> {
        let max = self.max_body;
        let work = async move {
            let mut response = req.send().await?;
            let status = response.status();
            let headers = std::mem::take(response.headers_mut());
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > max {
                    return Ok(Err(()));
                }
                body.extend_from_slice(&chunk);
            }
            Ok::<_, reqwest::Error>(Ok(Reply {
                status,
                headers,
                body,
            }))
        };
        match tokio::time::timeout(self.timeout, work).await {
            Err(_) => Err(AuthError::Timeout {
                what,
                url: strip_query(url),
            }),
            Ok(Err(source)) if source.is_timeout() => Err(AuthError::Timeout {
                what,
                url: strip_query(url),
            }),
            Ok(Err(source)) => Err(AuthError::Http {
                what,
                url: strip_query(url),
                source: source.without_url(),
            }),
            Ok(Ok(Err(()))) => Err(AuthError::InvalidResponse {
                what,
                url: strip_query(url),
                detail: format!("body larger than {max} bytes"),
            }),
            Ok(Ok(Ok(reply))) => {
                tracing::debug!(what, url = %strip_query(url), status = reply.status.as_u16(), "oauth http");
                Ok(reply)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_urls() {
        for ok in [
            "https://x.example/a",
            "http://localhost:3000/",
            "http://LOCALHOST/",
            "http://127.0.0.1:9/",
            "http://127.1.2.3/",
            "http://[::1]:80/",
            "http://app.localhost/",
        ] {
            assert!(is_secure(&Url::parse(ok).unwrap()), "{ok}");
        }
        for bad in [
            "http://x.example/",
            "http://10.0.0.1/",
            "ftp://localhost/",
            "http://localhost.evil.com/",
        ] {
            assert!(!is_secure(&Url::parse(bad).unwrap()), "{bad}");
        }
    }

    #[test]
    fn clip_strips_controls() {
        assert_eq!(clip("a\nb\u{1b}[31m"), "ab[31m");
        assert_eq!(clip(&"x".repeat(500)).len(), 200);
    }
}
