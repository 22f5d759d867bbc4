//! Who a request through the gateway comes from: the identity the transport vouched for
//! (an access token over HTTP with `[auth]`, the local OS user over stdio), as policy,
//! consent, rate limits and the audit trail each need it.

use moat::RequestContext;
use moat_protocol::ErrorObject;

use crate::config::auth::AuthConfig;
use crate::policy::Who;

/// The caller of one request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caller {
    /// As policy rules test it; `None` when nobody vouched for the caller.
    pub(crate) who: Option<Who>,
    /// The token's OAuth client.
    pub(crate) client_id: Option<String>,
    /// Whether an issuer vouched (a token), rather than the local system.
    pub(crate) by_token: bool,
    /// The user as per-user state (lasting consent, rate limits) tells users apart: the
    /// name, followed by its issuer for every issuer but the first, so that users of two
    /// issuers who carry the same name never share that state.
    state_user: Option<String>,
}

impl Caller {
    /// The caller of the request `ctx` answers, mapped by `auth`'s claims.
    pub(crate) fn of(ctx: &RequestContext, auth: Option<&AuthConfig>) -> Caller {
        let Some(identity) = ctx.identity() else {
            return Caller::default();
        };
        let (user_claim, groups_claim) = match auth {
            Some(a) => a.claims_of(identity.issuer.as_deref()),
            None => ("sub", "groups"),
        };
        let who = Who::of(identity, user_claim, groups_claim);
        let first = auth
            .and_then(|a| a.issuers.first())
            .map(|i| i.issuer.as_str());
        let state_user = who.user.as_ref().map(|user| match &identity.issuer {
            Some(issuer) if Some(issuer.as_str()) != first => format!("{user} ({issuer})"),
            _ => user.clone(),
        });
        Caller {
            who: Some(who),
            client_id: identity.client_id.clone(),
            by_token: identity.issuer.is_some(),
            state_user,
        }
    }

    /// The user's name, if known (as policy rules and the audit trail name them).
    pub(crate) fn user(&self) -> Option<&str> {
        self.who.as_ref().and_then(|w| w.user.as_deref())
    }

    /// Whose rate-limit buckets a call takes from (see `state_user`).
    pub(crate) fn rate_user(&self) -> Option<&str> {
        self.state_user.as_deref()
    }

    /// Whose lasting consent decisions apply: a token's user's own. The local user (and
    /// an unauthenticated HTTP caller) is the gateway's own user, whose decisions are the
    /// store's unscoped ones, as before users were told apart.
    pub(crate) fn consent_user(&self) -> Option<&str> {
        if self.by_token {
            self.state_user.as_deref()
        } else {
            None
        }
    }
}

/// The `[auth.tool_scopes]` scopes a token must carry to call `exposed` that this one
/// lacks, as the error that asks the client to step up; `Ok` when none is missing or no
/// token is involved.
pub(crate) fn check_tool_scopes(
    ctx: &RequestContext,
    auth: Option<&AuthConfig>,
    exposed: &str,
) -> Result<(), ErrorObject> {
    let (Some(auth), Some(identity)) = (auth, ctx.identity()) else {
        return Ok(());
    };
    if identity.issuer.is_none() || auth.tool_scopes.is_empty() {
        return Ok(());
    }
    let mut needed: Vec<String> = Vec::new();
    for (globs, scopes) in &auth.tool_scopes {
        let selects = globs
            .0
            .iter()
            .any(|g| globset::Glob::new(g).is_ok_and(|g| g.compile_matcher().is_match(exposed)));
        if selects {
            needed.extend(
                scopes
                    .iter()
                    .filter(|s| !needed.contains(s))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
        }
    }
    if needed.iter().all(|s| identity.has_scope(s)) {
        return Ok(());
    }
    Err(moat::transport::http::server::insufficient_scope(&needed))
}
