//! Skills through the gateway (the Skills extension, SEP-2640): every server's skills, each
//! under its server's name (`skill://docs/release-notes/SKILL.md` is `docs`'s
//! `skill://release-notes/SKILL.md`), shown to a caller only when policy would show them a
//! tool of that name on that server, and read from the server that offers them.
//!
//! The skills are asked for when a client asks (the extension has no change notification, so
//! a copy could not be kept fresh); each server's skill roots are remembered from its last
//! listing so that a file read can be matched to its skill for the policy check.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use moat::RequestContext;
use moat::server::SkillSource;
use moat::server::skills::SKILL_SCHEME;
use moat_protocol::ErrorObject;
use moat_protocol::error::INVALID_PARAMS;
use moat_protocol::types::{Resource, ResourceContents, Skill, SkillResources};
use tracing::Instrument;

use crate::catalog::passed_on;
use crate::inner::Inner;
use crate::policy::ToolRef;
use crate::telemetry::spans;

type BoxFuture<T> = moat::handler::BoxFuture<T>;

/// Per server, its skills' root URIs (as the server names them) and names.
type SkillRoots = Arc<Mutex<HashMap<String, Vec<(String, String)>>>>;

/// The gateway's [`SkillSource`]: forwards to the servers that declared the extension.
#[derive(Clone)]
pub(crate) struct Forwarder {
    inner: Weak<Inner>,
    /// From each server's last listing.
    roots: SkillRoots,
}

impl Forwarder {
    pub(crate) fn new(inner: Weak<Inner>) -> Forwarder {
        Forwarder {
            inner,
            roots: Arc::default(),
        }
    }
}

/// A skill URI as the client sees it: `skill://SERVER/` and the server's own path.
fn exposed_uri(server: &str, uri: &str) -> String {
    match uri.strip_prefix(SKILL_SCHEME) {
        Some(rest) => format!("{SKILL_SCHEME}{server}/{rest}"),
        // Not a skill URI (a skill may list files elsewhere): left as it is.
        None => uri.to_owned(),
    }
}

/// The server and its own URI behind a URI the client sent.
fn downstream_uri(uri: &str) -> Option<(&str, String)> {
    let rest = uri.strip_prefix(SKILL_SCHEME)?;
    let (server, path) = rest.split_once('/')?;
    (!server.is_empty() && !path.is_empty()).then(|| (server, format!("{SKILL_SCHEME}{path}")))
}

/// The directory holding a skill's `SKILL.md`.
fn root_of(skill_md: &str) -> &str {
    skill_md.rsplit_once('/').map_or(skill_md, |(root, _)| root)
}

fn exposed_skill(server: &str, mut skill: Skill) -> Skill {
    skill.uri = exposed_uri(server, &skill.uri);
    if let SkillResources::Files(files) = &mut skill.resources {
        for file in files {
            file.uri = exposed_uri(server, &file.uri);
        }
    }
    skill
}

fn exposed_contents(server: &str, contents: &mut [ResourceContents]) {
    for c in contents {
        match c {
            ResourceContents::Text(t) => t.uri = exposed_uri(server, &t.uri),
            ResourceContents::Blob(b) => b.uri = exposed_uri(server, &b.uri),
            _ => {}
        }
    }
}

/// Whether the server's error means "no such skill or file" (then the client gets the
/// gateway's own not-found, naming the URI it sent).
fn not_found(e: &moat::Error) -> bool {
    matches!(e, moat::Error::Remote { error, .. }
        if error.code == INVALID_PARAMS || error.code == moat_protocol::error::RESOURCE_NOT_FOUND)
}

impl Inner {
    /// Whether the caller of `ctx` may see `server`'s skill `name`: policy shows them a
    /// tool of that name on that server.
    fn skill_visible(&self, ctx: &RequestContext, server: &str, name: &str) -> bool {
        let settings = self.settings();
        let caller = crate::caller::Caller::of(ctx, settings.config.auth.as_ref());
        settings
            .policy
            .visible_to(&ToolRef::new(server, name), caller.who.as_ref())
    }

    /// The servers that are up and declared the extension, in configuration order.
    fn skill_servers(&self) -> Vec<(String, Arc<moat::Client>)> {
        let names: Vec<String> = self
            .settings()
            .config
            .servers
            .iter()
            .map(|s| s.name.clone())
            .collect();
        names
            .into_iter()
            .filter_map(|name| {
                let client = self.live_client(&name)?;
                client.offers_skills().then_some((name, client))
            })
            .collect()
    }

    /// `server`'s live connection, if it declared the extension; waits while it starts.
    async fn skill_server(&self, server: &str) -> Result<Option<Arc<moat::Client>>, ErrorObject> {
        if self.settings().config.server(server).is_none() {
            return Ok(None);
        }
        let client = self
            .wait_live(server)
            .await
            .map_err(ErrorObject::internal)?;
        Ok(client.offers_skills().then_some(client))
    }
}

/// Where a URI the client sent leads: the server offering it, live, and its own URI.
struct Target {
    inner: Arc<Inner>,
    server: String,
    original: String,
    client: Arc<moat::Client>,
}

impl Forwarder {
    /// The server and URI behind `uri`, if it names a configured server that declared the
    /// extension (waiting while it starts).
    async fn target(&self, uri: &str) -> Result<Option<Target>, ErrorObject> {
        let Some(inner) = self.inner.upgrade() else {
            return Ok(None);
        };
        let Some((server, original)) = downstream_uri(uri) else {
            return Ok(None);
        };
        let Some(client) = inner.skill_server(server).await? else {
            return Ok(None);
        };
        Ok(Some(Target {
            server: server.to_owned(),
            original,
            client,
            inner,
        }))
    }

    /// [`target`](Self::target), when the file or directory belongs to a skill the caller
    /// may see.
    async fn readable_target(
        &self,
        ctx: &RequestContext,
        uri: &str,
    ) -> Result<Option<Target>, ErrorObject> {
        let Some(t) = self.target(uri).await? else {
            return Ok(None);
        };
        let readable = self
            .readable(&t.inner, ctx, &t.server, &t.client, &t.original)
            .await;
        Ok(readable.then_some(t))
    }

    fn remember(&self, server: &str, skills: &[Skill]) {
        let roots = skills
            .iter()
            .map(|s| (root_of(&s.uri).to_owned(), s.name().to_owned()))
            .collect();
        self.roots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(server.to_owned(), roots);
    }

    /// The name of the skill whose directory holds `uri` (the server's own URI), from the
    /// server's last listing, listing it again when the URI is under no known skill.
    async fn owner(
        roots: &SkillRoots,
        server: &str,
        client: &moat::Client,
        uri: &str,
    ) -> Option<String> {
        let find = |roots: &HashMap<String, Vec<(String, String)>>| {
            roots.get(server).and_then(|list| {
                list.iter()
                    .filter(|(root, _)| {
                        uri == root
                            || uri
                                .strip_prefix(root.as_str())
                                .is_some_and(|r| r.starts_with('/'))
                    })
                    .max_by_key(|(root, _)| root.len())
                    .map(|(_, name)| name.clone())
            })
        };
        if let Some(name) = find(&roots.lock().unwrap_or_else(|e| e.into_inner())) {
            return Some(name);
        }
        let skills = client.list_all_skills().await.ok()?;
        let listed = skills
            .iter()
            .map(|s| (root_of(&s.uri).to_owned(), s.name().to_owned()))
            .collect();
        let mut roots = roots.lock().unwrap_or_else(|e| e.into_inner());
        roots.insert(server.to_owned(), listed);
        find(&roots)
    }

    /// Whether the caller may read `uri` (the server's own) of `server`: the file belongs
    /// to a skill they may see. A file under no skill the server lists is not one.
    async fn readable(
        &self,
        inner: &Inner,
        ctx: &RequestContext,
        server: &str,
        client: &moat::Client,
        uri: &str,
    ) -> bool {
        match Self::owner(&self.roots, server, client, uri).await {
            Some(name) => inner.skill_visible(ctx, server, &name),
            None => false,
        }
    }
}

impl SkillSource for Forwarder {
    fn list(&self, ctx: &RequestContext) -> BoxFuture<Result<Vec<Skill>, ErrorObject>> {
        let weak = self.inner.clone();
        let ctx = ctx.clone();
        let this = self.clone();
        Box::pin(async move {
            let Some(inner) = weak.upgrade() else {
                return Ok(Vec::new());
            };
            let mut asks = tokio::task::JoinSet::new();
            let servers = inner.skill_servers();
            for (i, (server, client)) in servers.into_iter().enumerate() {
                let within = inner.call_timeout(&server);
                asks.spawn(async move {
                    let span = spans::request("skills/list", "", &server);
                    let listed = tokio::time::timeout(within, client.list_all_skills())
                        .instrument(span)
                        .await;
                    (i, server, listed)
                });
            }
            let mut lists = Vec::new();
            while let Some(done) = asks.join_next().await {
                if let Ok(done) = done {
                    lists.push(done);
                }
            }
            lists.sort_by_key(|(i, _, _)| *i);
            let mut out = Vec::new();
            for (_, server, listed) in lists {
                let skills = match listed {
                    Ok(Ok(skills)) => skills,
                    Ok(Err(e)) => {
                        tracing::warn!(server, error = %e, "skills/list failed");
                        continue;
                    }
                    Err(_) => {
                        tracing::warn!(server, "skills/list timed out");
                        continue;
                    }
                };
                this.remember(&server, &skills);
                out.extend(
                    skills
                        .into_iter()
                        .filter(|s| inner.skill_visible(&ctx, &server, s.name()))
                        .map(|s| exposed_skill(&server, s)),
                );
            }
            Ok(out)
        })
    }

    fn get(
        &self,
        ctx: &RequestContext,
        uri: &str,
    ) -> BoxFuture<Result<Option<Skill>, ErrorObject>> {
        let this = self.clone();
        let ctx = ctx.clone();
        let uri = uri.to_owned();
        Box::pin(async move {
            let Some(Target {
                inner,
                server,
                original,
                client,
            }) = this.target(&uri).await?
            else {
                return Ok(None);
            };
            let skill = match client
                .get_skill(&original)
                .instrument(spans::request("skills/get", &original, &server))
                .await
            {
                Ok(skill) => skill,
                Err(e) if not_found(&e) => return Ok(None),
                Err(e) => return Err(passed_on(&server, e)),
            };
            if !inner.skill_visible(&ctx, &server, skill.name()) {
                return Ok(None);
            }
            Ok(Some(exposed_skill(&server, skill)))
        })
    }

    fn read(
        &self,
        ctx: &RequestContext,
        uri: &str,
    ) -> BoxFuture<Result<Option<Vec<ResourceContents>>, ErrorObject>> {
        let this = self.clone();
        let ctx = ctx.clone();
        let uri = uri.to_owned();
        Box::pin(async move {
            let Some(Target {
                inner,
                server,
                original,
                client,
            }) = this.readable_target(&ctx, &uri).await?
            else {
                return Ok(None);
            };
            let options = moat::RequestOptions::default().answer_with(
                crate::requests::answerer_for(&inner, &ctx, &server, &client),
            );
            let mut result = match client
                .read_resource_with(&original, options)
                .instrument(spans::request("resources/read", &original, &server))
                .await
            {
                Ok(result) => result,
                Err(e) if not_found(&e) => return Ok(None),
                Err(e) => return Err(passed_on(&server, e)),
            };
            if inner
                .server_config(&server)
                .and_then(|c| c.trust.untrusted)
                .unwrap_or(false)
            {
                inner
                    .sessions()
                    .taint(&ctx, &format!("skill file {original} of {server}"));
            }
            exposed_contents(&server, &mut result.contents);
            Ok(Some(result.contents))
        })
    }

    fn directory(
        &self,
        ctx: &RequestContext,
        uri: &str,
    ) -> BoxFuture<Result<Option<Vec<Resource>>, ErrorObject>> {
        let this = self.clone();
        let ctx = ctx.clone();
        let uri = uri.to_owned();
        Box::pin(async move {
            let Some(Target {
                server,
                original,
                client,
                ..
            }) = this.readable_target(&ctx, &uri).await?
            else {
                return Ok(None);
            };
            if !client.skills_settings().is_some_and(|s| s.directory_read) {
                return Ok(None);
            }
            let mut listing = match client
                .read_directory(&original)
                .instrument(spans::request(
                    "resources/directory/read",
                    &original,
                    &server,
                ))
                .await
            {
                Ok(listing) => listing,
                Err(e) if not_found(&e) => return Ok(None),
                Err(e) => return Err(passed_on(&server, e)),
            };
            for entry in &mut listing {
                entry.uri = exposed_uri(&server, &entry.uri);
            }
            Ok(Some(listing))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_gain_and_lose_the_server_segment() {
        let out = exposed_uri("docs", "skill://acme/notes/SKILL.md");
        assert_eq!(out, "skill://docs/acme/notes/SKILL.md");
        assert_eq!(
            downstream_uri(&out),
            Some(("docs", "skill://acme/notes/SKILL.md".to_owned()))
        );
        assert_eq!(exposed_uri("docs", "file:///x"), "file:///x");
        for bare in [
            "skill://docs",
            "skill://docs/",
            "skill:///x",
            "file:///docs/x",
        ] {
            assert_eq!(downstream_uri(bare), None, "{bare}");
        }
        assert_eq!(root_of("skill://a/b/SKILL.md"), "skill://a/b");
    }
}
