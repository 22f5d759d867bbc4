//! Authorization for the `auth/*` scenarios: the one place where the HTTP options get their
//! credentials, chosen from the scenario's name and `MCP_CONFORMANCE_CONTEXT`.
//!
//! **Not wired yet.** The transport's OAuth 2.1 client (`moat::transport::http::oauth`, an
//! `Authorizer` the HTTP transport consults on every request and every 401/403) is still being
//! written. When it lands, [`configure`] builds an `OAuthClient` for the server URL from the
//! [`Credentials`] below (the context fields each needs are listed there; a headless user
//! agent that reads the code from the authorization endpoint's redirect stands in for the
//! browser) and hands it to the options. Until then the `auth/*` scenarios run their MCP steps
//! without credentials and stop at the server's 401, which the suite reports as failures.

use moat::HttpOptions;

use crate::invocation::Invocation;

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
    tracing::warn!(
        scenario = %invocation.scenario,
        ?credentials,
        "OAuth is not wired into the conformance client yet; running without credentials"
    );
    Ok(options)
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
}
