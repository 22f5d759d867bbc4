//! Authorization for the `auth/*` scenarios: the one place where the HTTP options get their
//! credentials, chosen from the scenario's name and `MCP_CONFORMANCE_CONTEXT`.
//!
//! [`configure`] turns the scenario's [`Credentials`] into an OAuth configuration
//! (`moat::client::oauth`) and hands it to the HTTP options; the transport then builds an
//! `OAuthClient` for the server URL and consults it on every request: on the mock server's
//! 401 it discovers, registers, authorizes and retries, as any application's client would.
//! The authorization code grant runs through a headless user agent that reads the code from
//! the mock authorization endpoint's redirect (it approves without a user).

use anyhow::{Context, bail};
use moat::HttpOptions;
use moat::client::oauth::{
    ClientCredentials, EcKey, Grant, HeadlessUserAgent, IdentityAssertion, OAuthConfig,
    PreRegisteredClient, Secret,
};
use serde_json::Value;

use crate::invocation::Invocation;

/// The Client ID Metadata Document URL the suite's mock authorization servers expect (they
/// fetch nothing: the URL is the client id).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// How a scenario's client obtains its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credentials {
    /// Authorization code with PKCE; the client identity from a Client ID Metadata Document
    /// when the server supports them, else Dynamic Client Registration.
    AuthorizationCode,
    /// Authorization code as a pre-registered client: context `{client_id, client_secret}`.
    PreRegistered,
    /// `client_credentials` with `client_secret_basic`: context `{client_id, client_secret}`.
    ClientSecret,
    /// `client_credentials` with `private_key_jwt`: context
    /// `{client_id, private_key_pem, signing_algorithm}`.
    PrivateKeyJwt,
    /// Enterprise-managed authorization: a token exchange at the IdP for an ID-JAG, then the
    /// JWT bearer grant. Context `{client_id, client_secret, idp_client_id, idp_id_token,
    /// idp_issuer, idp_token_endpoint}`.
    EnterpriseManaged,
    /// The JWT bearer grant with a workload identity token: context `{client_id, valid_jwt}`.
    WorkloadIdentity,
    /// Authorization code with DPoP-bound tokens (RFC 9449).
    DPoP,
}

/// The credentials an `auth/*` scenario calls for; `None` for every other scenario.
pub fn credentials_for(scenario: &str) -> Option<Credentials> {
    let name = scenario.strip_prefix("auth/")?;
    Some(match name {
        "pre-registration" => Credentials::PreRegistered,
        "client-credentials-basic" => Credentials::ClientSecret,
        "client-credentials-jwt" => Credentials::PrivateKeyJwt,
        "cross-app-access-complete-flow" | "enterprise-managed-authorization" => {
            Credentials::EnterpriseManaged
        }
        "wif-jwt-bearer" => Credentials::WorkloadIdentity,
        "dpop" | "dpop-nonce" => Credentials::DPoP,
        _ => Credentials::AuthorizationCode,
    })
}

/// The HTTP options for this run, with the scenario's authorization configured.
pub fn configure(invocation: &Invocation, options: HttpOptions) -> anyhow::Result<HttpOptions> {
    let Some(credentials) = credentials_for(&invocation.scenario) else {
        return Ok(options);
    };
    let config = oauth_config(credentials, &invocation.context)
        .with_context(|| format!("the credentials of {}", invocation.scenario))?;
    tracing::info!(scenario = %invocation.scenario, ?credentials, "authorizing with OAuth");
    Ok(options.oauth(config.client_name("moat-conformance-client")))
}

/// The OAuth configuration for `credentials`, with what it needs from the context.
fn oauth_config(credentials: Credentials, context: &Value) -> anyhow::Result<OAuthConfig> {
    let field = |name: &str| -> anyhow::Result<String> {
        match context.get(name).and_then(Value::as_str) {
            Some(v) => Ok(v.to_owned()),
            None => bail!("MCP_CONFORMANCE_CONTEXT has no {name}"),
        }
    };
    let headless = || OAuthConfig::authorization_code(HeadlessUserAgent::default());
    Ok(match credentials {
        Credentials::AuthorizationCode => headless().client_metadata_url(CLIENT_METADATA_URL),
        Credentials::PreRegistered => headless().pre_registered(PreRegisteredClient::new(
            field("client_id")?,
            Some(Secret::new(field("client_secret")?)),
        )),
        Credentials::ClientSecret => OAuthConfig::client_credentials(ClientCredentials::secret(
            field("client_id")?,
            field("client_secret")?,
        )),
        Credentials::PrivateKeyJwt => {
            if let Ok(alg) = field("signing_algorithm")
                && alg != "ES256"
            {
                bail!("signing algorithm {alg} is not supported (ES256 is)");
            }
            let key = EcKey::from_pem(&field("private_key_pem")?)
                .context("private_key_pem is not a P-256 key")?;
            OAuthConfig::client_credentials(ClientCredentials::private_key_jwt(
                field("client_id")?,
                key,
            ))
        }
        Credentials::EnterpriseManaged => {
            let idp = field("idp_token_endpoint")?;
            let idp = url::Url::parse(&idp)
                .with_context(|| format!("idp_token_endpoint {idp:?} is not a URL"))?;
            OAuthConfig::identity_assertion(IdentityAssertion::new(
                idp,
                field("idp_client_id")?,
                field("idp_id_token")?,
                ClientCredentials::secret(field("client_id")?, field("client_secret")?),
            ))
        }
        Credentials::WorkloadIdentity => {
            let mut config = OAuthConfig::jwt_bearer(field("valid_jwt")?);
            if let Grant::JwtBearer { client_id, .. } = &mut config.grant {
                *client_id = Some(field("client_id")?);
            }
            config
        }
        Credentials::DPoP => headless().dpop(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_map_to_credentials() {
        assert_eq!(credentials_for("tools_call"), None);
        assert_eq!(
            credentials_for("auth/metadata-default"),
            Some(Credentials::AuthorizationCode)
        );
        assert_eq!(
            credentials_for("auth/pre-registration"),
            Some(Credentials::PreRegistered)
        );
        assert_eq!(
            credentials_for("auth/enterprise-managed-authorization"),
            Some(Credentials::EnterpriseManaged)
        );
    }

    #[test]
    fn context_fields_are_required() {
        let err = oauth_config(Credentials::ClientSecret, &Value::Null).unwrap_err();
        assert!(err.to_string().contains("client_id"), "{err}");
        let ctx = serde_json::json!({"client_id": "c", "client_secret": "s"});
        assert!(oauth_config(Credentials::ClientSecret, &ctx).is_ok());
        assert!(oauth_config(Credentials::AuthorizationCode, &Value::Null).is_ok());
    }
}
