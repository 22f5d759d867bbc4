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
    /// name, followed by its issuer for every issuer but `[auth]`'s top-level one, so that
    /// users of two issuers who carry the same name never share that state; a token that
    /// names no user, by its client and issuer (never the local operator's state).
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
        let state_user = state_user(
            who.user.as_deref(),
            identity.issuer.as_deref(),
            identity.client_id.as_deref(),
            auth.and_then(|a| a.primary.as_deref()),
        );
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

/// Whose per-user state a caller uses (see the `state_user` field of [`Caller`]). The
/// issuer is a URL, which has no spaces, so the parts cannot be read two ways.
fn state_user(
    user: Option<&str>,
    issuer: Option<&str>,
    client_id: Option<&str>,
    primary: Option<&str>,
) -> Option<String> {
    match (user, issuer) {
        // The local OS user, or a caller nobody vouched for: as before issuers existed.
        (user, None) => user.map(str::to_owned),
        (Some(user), Some(issuer)) if Some(issuer) == primary => Some(user.to_owned()),
        (Some(user), Some(issuer)) => Some(format!("{user} ({issuer})")),
        (None, Some(issuer)) => Some(format!("client {} ({issuer})", client_id.unwrap_or("-"))),
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

#[cfg(test)]
mod tests {
    use super::state_user;

    #[test]
    fn per_user_state_never_mixes_issuers_nor_falls_to_the_operator() {
        let a = Some("https://a.example");
        let b = Some("https://b.example");
        // The top-level issuer's users keep their plain names (as with one issuer).
        assert_eq!(
            state_user(Some("dana"), a, None, a).as_deref(),
            Some("dana")
        );
        // Another issuer's user of the same name is another user.
        assert_eq!(
            state_user(Some("dana"), b, None, a).as_deref(),
            Some("dana (https://b.example)")
        );
        // With no top-level issuer, every issuer's users are named with it: reordering
        // `[[auth.issuers]]` changes nobody's name.
        assert_eq!(
            state_user(Some("dana"), a, None, None).as_deref(),
            Some("dana (https://a.example)")
        );
        // A token that names no user is its client's, never the operator's (None).
        assert_eq!(
            state_user(None, b, Some("ci-bot"), a).as_deref(),
            Some("client ci-bot (https://b.example)")
        );
        assert!(state_user(None, a, None, a).is_some());
        // The local user (no issuer) is as before.
        assert_eq!(
            state_user(Some("root"), None, None, a).as_deref(),
            Some("root")
        );
        assert_eq!(state_user(None, None, None, a), None);
    }
}
