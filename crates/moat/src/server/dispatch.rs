//! How a [`Server`](super::Server) answers one connection: the [`Handler`] each
//! connection's peer is given, which answers every MCP method from the shared registry
//! (multi-round-trip requests, tasks and `subscriptions/listen` included).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use moat_protocol::error::{ErrorObject, INVALID_PARAMS, RESOURCE_NOT_FOUND};
use moat_protocol::jsonrpc::decode_params;
use moat_protocol::session::RequestFields;
use moat_protocol::types::{
    CacheScope, CallToolResult, CompleteRequestParams, CompleteResult, DiscoverResult, EmptyResult,
    GetSkillRequestParams, GetSkillResult, InitializeRequestParams, InitializeResult,
    InputRequests, InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListSkillsRequestParams, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, PromptsCapability, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, ReadResourceResult, ResourceRequestParams, ResourcesCapability,
    ServerCapabilities, SetLevelRequestParams, Skill, SubscriptionFilter,
    SubscriptionsAcknowledgedNotificationParams, SubscriptionsListenRequestParams,
    SubscriptionsListenResult, TaskRequestsCapability, TaskSupport, TaskToolsCapability,
    TasksCapability, ToolsCapability, methods, skills as skills_ext, tasks_extension,
};
use moat_protocol::version::META_SERVER_INFO;
use moat_protocol::{Era, ProtocolVersion, RequestId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tasks_extension::TaskStatusNotificationParams;

use super::inner::ServerInner;
use super::resources::ResourceRequest;
use super::session::{Listener, Session, stream_meta};
use super::{pagination, tasks};
use crate::handler::{BoxFuture, Handler, HandlerResult, IncomingRequest, RequestContext};
use crate::mrtr::{self, Binding, Round, Stall};
use crate::peer::Peer;

/// Takes a listen stream off the session when its request ends, however it ends.
struct ListenGuard {
    session: Arc<Session>,
    id: RequestId,
    server: std::sync::Weak<ServerInner>,
    watched: Vec<String>,
}

impl Drop for ListenGuard {
    fn drop(&mut self) {
        self.session
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|l| l.id != self.id);
        if let Some(server) = self.server.upgrade() {
            for uri in &self.watched {
                server.subscription_changed(uri, false);
            }
        }
    }
}

/// The [`Handler`] a server gives each connection's peer.
pub(crate) struct SessionHandler {
    server: Arc<ServerInner>,
    session: Arc<Session>,
}

impl SessionHandler {
    pub(crate) fn new(server: Arc<ServerInner>, session: Arc<Session>) -> Self {
        SessionHandler { server, session }
    }
}

fn encode<T: Serialize>(value: &T) -> HandlerResult {
    serde_json::value::to_raw_value(value)
        .map_err(|e| ErrorObject::internal(format!("could not encode the result: {e}")))
}

fn is_modern(ctx: &RequestContext) -> bool {
    ctx.protocol_version().map(ProtocolVersion::era) == Some(Era::Modern)
}

/// The modern era's result fields: `resultType`, and cache hints for cacheable results.
/// A tool's result for a client before 2026-07-28: content its revision lacks downgraded,
/// and no `resultType` (that marker is 2026-07-28's).
fn encode_legacy_call(
    mut result: CallToolResult,
    version: Option<ProtocolVersion>,
) -> HandlerResult {
    if let Some(v) = version {
        v.downgrade_content(&mut result.content);
    }
    result.result_type = None;
    encode(&result)
}

fn complete_marker(ctx: &RequestContext) -> Option<String> {
    is_modern(ctx).then(|| "complete".to_owned())
}

impl ServerInner {
    /// What the server offers in `version` (the tasks of 2025-11-25 and the tasks
    /// extension of 2026-07-28 differ).
    fn capabilities(&self, version: Option<ProtocolVersion>) -> ServerCapabilities {
        let tasks = self.offers_tasks();
        let reg = self.registry();
        let skills = self.offers_skills();
        let legacy_tasks = tasks && version.is_some_and(ProtocolVersion::has_tasks);
        let extension = tasks && version.is_some_and(ProtocolVersion::has_tasks_extension);
        ServerCapabilities {
            tasks: legacy_tasks.then(|| TasksCapability {
                list: Some(Default::default()),
                cancel: Some(Default::default()),
                requests: Some(TaskRequestsCapability {
                    tools: Some(TaskToolsCapability {
                        call: Some(Default::default()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            extensions: (extension || skills).then(|| {
                let mut extensions = serde_json::Map::new();
                if extension {
                    extensions.insert(
                        tasks_extension::ID.to_owned(),
                        serde_json::Value::Object(Default::default()),
                    );
                }
                // In every revision: capabilities are open-ended before 2026-07-28 too.
                if skills {
                    extensions.insert(
                        skills_ext::SKILLS_EXTENSION.to_owned(),
                        serde_json::json!({ "directoryRead": true }),
                    );
                }
                extensions
            }),
            tools: Some(ToolsCapability {
                list_changed: Some(true),
                ..Default::default()
            }),
            resources: (self.declares_all()
                || skills
                || !reg.resources.is_empty()
                || !reg.templates.is_empty())
            .then(|| ResourcesCapability {
                subscribe: Some(true),
                list_changed: Some(true),
                ..Default::default()
            }),
            prompts: (self.declares_all() || !reg.prompts.is_empty()).then(|| PromptsCapability {
                list_changed: Some(true),
                ..Default::default()
            }),
            completions: reg.completion.as_ref().map(|_| Default::default()),
            logging: Some(Default::default()),
            ..Default::default()
        }
    }

    fn cache_hints(
        &self,
        ctx: &RequestContext,
    ) -> (Option<String>, Option<u64>, Option<CacheScope>) {
        if is_modern(ctx) {
            (
                Some("complete".to_owned()),
                Some(self.options().list_ttl_ms),
                Some(CacheScope::Private),
            )
        } else {
            (None, None, None)
        }
    }
}

impl Handler for SessionHandler {
    fn initialize(
        &self,
        params: Option<&RawValue>,
        peer: &Peer,
    ) -> Result<(Box<RawValue>, ProtocolVersion), ErrorObject> {
        let params: InitializeRequestParams = decode_params(params)?;
        let version = peer
            .supported_versions()
            .negotiate_handshake(&params.protocol_version)
            .ok_or_else(|| {
                peer.supported_versions()
                    .unsupported_error(&params.protocol_version)
            })?;
        tracing::debug!(
            client = %params.client_info.name,
            requested = %params.protocol_version,
            agreed = %version,
            "initialize"
        );
        peer.set_client_capabilities(params.capabilities);
        peer.set_peer_info(params.client_info);
        let result = InitializeResult {
            protocol_version: version.as_str().to_owned(),
            capabilities: self.server.capabilities(Some(version)),
            server_info: self.server.info.clone(),
            instructions: self
                .server
                .instructions
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            meta: None,
        };
        Ok((encode(&result)?, version))
    }

    fn handle_request(
        &self,
        request: IncomingRequest,
        ctx: RequestContext,
    ) -> BoxFuture<HandlerResult> {
        let server = self.server.clone();
        let session = self.session.clone();
        // Each request's future is allocated and moved whole, so its size is paid on every
        // request: a tool call's is only as large as a tool call needs, and the other
        // methods (whose futures are larger together) have one of their own.
        if request.method == methods::TOOLS_CALL {
            Box::pin(call_tool(server, session, request.fields, ctx))
        } else {
            Box::pin(dispatch(server, session, request, ctx))
        }
    }

    fn on_notification(&self, method: &str, _params: Option<&RawValue>, peer: &Peer) {
        match method {
            methods::NOTIFICATIONS_ROOTS_LIST_CHANGED => self.server.roots_changed(),
            methods::NOTIFICATIONS_INITIALIZED => {
                let notices = self.server.notices();
                if notices.is_empty() {
                    return;
                }
                let peer = peer.clone();
                let Ok(rt) = tokio::runtime::Handle::try_current() else {
                    return;
                };
                rt.spawn(async move {
                    for notice in notices {
                        if peer.log_level().is_some_and(|l| notice.level < l) {
                            continue;
                        }
                        let _ = peer.notify(methods::NOTIFICATIONS_MESSAGE, &notice).await;
                    }
                });
            }
            _ => {}
        }
    }

    fn on_close(&self, _peer: &Peer) {
        let subscribed: Vec<String> = self
            .session
            .subscriptions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for uri in subscribed {
            self.server.subscription_changed(&uri, false);
        }
        // 2025-11-25 tasks belong to their connection. Looking for them walks every task,
        // so only a connection that made one does (not each 2026-07-28 request).
        if self.session.owns_tasks() {
            self.server
                .tasks
                .drop_session(&Arc::downgrade(&self.session));
        }
        self.server.let_go(&self.session);
    }
}

async fn dispatch(
    server: Arc<ServerInner>,
    session: Arc<Session>,
    req: IncomingRequest,
    ctx: RequestContext,
) -> HandlerResult {
    let params = req.params.as_deref();
    if reads_registry(&req.method) {
        server.ready().await;
    }
    match req.method.as_str() {
        // The extension's methods exist only where it was declared.
        skills_ext::SKILLS_LIST | skills_ext::SKILLS_GET | skills_ext::RESOURCES_DIRECTORY_READ
            if !server.offers_skills() =>
        {
            Err(ErrorObject::method_not_found(&req.method))
        }
        methods::TASKS_GET
        | methods::TASKS_CANCEL
        | methods::TASKS_RESULT
        | methods::TASKS_LIST
        | tasks_extension::TASKS_UPDATE => {
            tasks::handle(&server, &session, &req.method, params, ctx).await
        }
        methods::TOOLS_LIST => {
            let p: PaginatedRequestParams = decode_params(params)?;
            let page_size = server.options().page_size;
            // `execution.taskSupport` is 2025-11-25's; the tasks extension has none.
            let execution = ctx
                .protocol_version()
                .is_some_and(ProtocolVersion::has_tasks);
            // Only the page is copied out of the registry (a gateway lists hundreds).
            let (tools, next_cursor) = {
                let registry = server.registry();
                let shown: Vec<&super::tools::ToolEntry> = match &registry.tool_filter {
                    Some(keep) => registry
                        .tools
                        .iter()
                        .filter(|t| keep(&ctx, &t.def))
                        .collect(),
                    None => registry.tools.iter().collect(),
                };
                let (range, next) =
                    pagination::page_range(shown.len(), p.cursor.as_deref(), "tools", page_size)?;
                let tools: Vec<_> = shown[range]
                    .iter()
                    .map(|t| {
                        let mut def = moat_protocol::types::Tool::clone(&t.def);
                        if !execution {
                            def.execution = None;
                        }
                        def
                    })
                    .collect();
                (tools, next)
            };
            // A 2026-07-28 client has no start to be told at: it hears the standing
            // notices with each list it asks for messages on.
            if ctx
                .protocol_version()
                .is_some_and(|v| v.era() == Era::Modern)
                && ctx.log_level().is_some()
            {
                for notice in server.notices() {
                    ctx.log(notice.level, notice.logger.as_deref(), notice.data)
                        .await;
                }
            }
            let (result_type, ttl_ms, cache_scope) = server.cache_hints(&ctx);
            encode(&ListToolsResult {
                tools,
                next_cursor,
                result_type,
                ttl_ms,
                cache_scope,
                ..Default::default()
            })
        }
        methods::RESOURCES_LIST => {
            let p: PaginatedRequestParams = decode_params(params)?;
            let defs: Vec<_> = server
                .registry()
                .resources
                .iter()
                .map(|r| r.def.clone())
                .collect();
            let (resources, next_cursor) = pagination::page(
                &defs,
                p.cursor.as_deref(),
                "resources",
                server.options().page_size,
            )?;
            let (result_type, ttl_ms, cache_scope) = server.cache_hints(&ctx);
            encode(&ListResourcesResult {
                resources,
                next_cursor,
                result_type,
                ttl_ms,
                cache_scope,
                ..Default::default()
            })
        }
        methods::RESOURCES_TEMPLATES_LIST => {
            let p: PaginatedRequestParams = decode_params(params)?;
            let defs: Vec<_> = server
                .registry()
                .templates
                .iter()
                .map(|t| t.def.clone())
                .collect();
            let (resource_templates, next_cursor) = pagination::page(
                &defs,
                p.cursor.as_deref(),
                "templates",
                server.options().page_size,
            )?;
            let (result_type, ttl_ms, cache_scope) = server.cache_hints(&ctx);
            encode(&ListResourceTemplatesResult {
                resource_templates,
                next_cursor,
                result_type,
                ttl_ms,
                cache_scope,
                ..Default::default()
            })
        }
        methods::RESOURCES_READ => {
            let p = req.fields?;
            let Some(uri) = p.uri else {
                return Err(ErrorObject::invalid_params(
                    "Invalid params: missing field `uri`",
                ));
            };
            if is_modern(&ctx) {
                let retry = Retry::read(p.input_responses.as_deref(), p.request_state)?;
                let bound_uri = uri.clone();
                let binding = move || Binding::new(methods::RESOURCES_READ, &bound_uri, None);
                let inner = server.clone();
                in_rounds(
                    &server,
                    ctx,
                    binding,
                    retry.request_state,
                    retry.input_responses,
                    move |ctx| async move { read_resource(&inner, uri, ctx).await },
                )
                .await
            } else {
                read_resource(&server, uri, ctx).await
            }
        }
        methods::RESOURCES_SUBSCRIBE | methods::RESOURCES_UNSUBSCRIBE => {
            let p: ResourceRequestParams = decode_params(params)?;
            let subscribe = req.method == methods::RESOURCES_SUBSCRIBE;
            let changed = {
                let mut subs = session
                    .subscriptions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                if subscribe {
                    subs.insert(p.uri.clone())
                } else {
                    subs.remove(&p.uri)
                }
            };
            if changed {
                server.subscription_changed(&p.uri, subscribe);
            }
            encode(&EmptyResult {
                result_type: complete_marker(&ctx),
                ..Default::default()
            })
        }
        methods::PROMPTS_LIST => {
            let p: PaginatedRequestParams = decode_params(params)?;
            let defs: Vec<_> = server
                .registry()
                .prompts
                .iter()
                .map(|p| p.def.clone())
                .collect();
            let (prompts, next_cursor) = pagination::page(
                &defs,
                p.cursor.as_deref(),
                "prompts",
                server.options().page_size,
            )?;
            let (result_type, ttl_ms, cache_scope) = server.cache_hints(&ctx);
            encode(&ListPromptsResult {
                prompts,
                next_cursor,
                result_type,
                ttl_ms,
                cache_scope,
                ..Default::default()
            })
        }
        methods::PROMPTS_GET => {
            let p = req.fields?;
            let Some(name) = p.name else {
                return Err(ErrorObject::invalid_params(
                    "Invalid params: missing field `name`",
                ));
            };
            let entry = server
                .registry()
                .prompts
                .iter()
                .find(|e| e.def.name == name)
                .cloned();
            let Some(entry) = entry else {
                return Err(ErrorObject::invalid_params(format!(
                    "Invalid params: unknown prompt {name:?}"
                )));
            };
            // A prompt's arguments are strings by name (`null` meaning none).
            let args: BTreeMap<String, String> = match p.arguments.as_deref() {
                Some(raw) => serde_json::from_str::<Option<BTreeMap<String, String>>>(raw.get())
                    .map_err(|e| {
                        ErrorObject::invalid_params(format!("Invalid params: arguments: {e}"))
                    })?
                    .unwrap_or_default(),
                None => BTreeMap::new(),
            };
            let args_value = serde_json::to_value(&args).unwrap_or_default();
            let args = args_value.clone();
            let marker = complete_marker(&ctx);
            let get = move |ctx: RequestContext| async move {
                let version = ctx.protocol_version();
                let mut result = (entry.get)(ctx, args).await?;
                if let Some(v) = version {
                    for message in &mut result.messages {
                        v.downgrade_content(std::slice::from_mut(&mut message.content));
                    }
                }
                result.result_type = marker;
                encode(&result)
            };
            if is_modern(&ctx) {
                let retry = Retry::read(p.input_responses.as_deref(), p.request_state)?;
                let binding = move || Binding::new(methods::PROMPTS_GET, &name, Some(&args_value));
                in_rounds(
                    &server,
                    ctx,
                    binding,
                    retry.request_state,
                    retry.input_responses,
                    get,
                )
                .await
            } else {
                get(ctx).await
            }
        }
        methods::COMPLETION_COMPLETE => {
            let p: CompleteRequestParams = decode_params(params)?;
            let complete = server.registry().completion.clone();
            let Some(complete) = complete else {
                return Err(ErrorObject::method_not_found(&req.method));
            };
            let marker = complete_marker(&ctx);
            let completion = complete(ctx, p).await?;
            encode(&CompleteResult {
                completion,
                result_type: marker,
                ..Default::default()
            })
        }
        skills_ext::SKILLS_LIST => {
            let p: ListSkillsRequestParams = decode_params(params)?;
            let mut skills: Vec<Skill> = server.skills().iter().map(|s| s.describe()).collect();
            if let Some(source) = server.skill_source() {
                skills.extend(source.list(&ctx).await?);
            }
            let (range, next_cursor) = crate::server::pagination::page_range(
                skills.len(),
                p.cursor.as_deref(),
                "skills",
                server.options().page_size,
            )?;
            let (result_type, ttl_ms, cache_scope) = server.cache_hints(&ctx);
            encode(&ListSkillsResult {
                skills: skills.drain(range).collect(),
                next_cursor,
                result_type,
                ttl_ms,
                cache_scope,
                ..Default::default()
            })
        }
        skills_ext::SKILLS_GET => {
            let p: GetSkillRequestParams = decode_params(params)?;
            let bundled = server
                .skills()
                .into_iter()
                .find(|s| s.skill_md_uri() == p.uri)
                .map(|s| s.describe());
            let skill = match (bundled, server.skill_source()) {
                (Some(skill), _) => Some(skill),
                (None, Some(source)) => source.get(&ctx, &p.uri).await?,
                (None, None) => None,
            };
            let skill = skill.ok_or_else(|| {
                ErrorObject::invalid_params(format!(
                    "Invalid params: no skill has its SKILL.md at {}",
                    p.uri
                ))
            })?;
            let (result_type, ttl_ms, cache_scope) = server.cache_hints(&ctx);
            encode(&GetSkillResult {
                skill,
                result_type,
                ttl_ms,
                cache_scope,
                meta: None,
            })
        }
        skills_ext::RESOURCES_DIRECTORY_READ => {
            let p: ReadResourceDirectoryRequestParams = decode_params(params)?;
            let bundled = server.skills().iter().find_map(|s| s.directory(&p.uri));
            let listing = match (bundled, server.skill_source()) {
                (Some(listing), _) => Some(listing),
                (None, Some(source)) => source.directory(&ctx, &p.uri).await?,
                (None, None) => None,
            };
            let listing = listing.ok_or_else(|| {
                ErrorObject::invalid_params(format!(
                    "Invalid params: {} is not a directory this server serves",
                    p.uri
                ))
            })?;
            let (range, next_cursor) = crate::server::pagination::page_range(
                listing.len(),
                p.cursor.as_deref(),
                "directory",
                server.options().page_size,
            )?;
            encode(&ReadResourceDirectoryResult {
                resources: listing[range].to_vec(),
                next_cursor,
                result_type: server.cache_hints(&ctx).0,
                meta: None,
            })
        }
        methods::LOGGING_SET_LEVEL => {
            let p: SetLevelRequestParams = decode_params(params)?;
            ctx.peer().set_log_level(p.level);
            encode(&EmptyResult {
                result_type: complete_marker(&ctx),
                ..Default::default()
            })
        }
        methods::SUBSCRIPTIONS_LISTEN if is_modern(&ctx) => {
            let p: SubscriptionsListenRequestParams = decode_params(params)?;
            let tasks: ListenTasks = decode_params(params)?;
            let task_ids = tasks.notifications.task_ids.unwrap_or_default();
            listen(&server, session, p.notifications, task_ids, ctx).await
        }
        methods::SERVER_DISCOVER => {
            let versions = ctx.peer().supported_versions().strings();
            let mut result = DiscoverResult {
                supported_versions: versions,
                capabilities: server.capabilities(ctx.protocol_version()),
                instructions: server
                    .instructions
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone(),
                result_type: Some("complete".to_owned()),
                ttl_ms: Some(server.options().list_ttl_ms),
                cache_scope: Some(CacheScope::Public),
                ..Default::default()
            };
            result.set_server_info(&server.info);
            debug_assert!(
                result
                    .meta
                    .as_ref()
                    .is_some_and(|m| m.contains_key(META_SERVER_INFO))
            );
            encode(&result)
        }
        other => Err(ErrorObject::method_not_found(other)),
    }
}

/// Whether answering `method` reads what the server offers (and so waits for
/// [`ServerInner::ready`]; `tools/call`, which does too, waits in [`call_tool`]).
fn reads_registry(method: &str) -> bool {
    matches!(
        method,
        methods::TOOLS_LIST
            | methods::RESOURCES_LIST
            | methods::RESOURCES_TEMPLATES_LIST
            | methods::RESOURCES_READ
            | methods::PROMPTS_LIST
            | methods::PROMPTS_GET
            | methods::COMPLETION_COMPLETE
            | skills_ext::SKILLS_LIST
            | skills_ext::SKILLS_GET
            | skills_ext::RESOURCES_DIRECTORY_READ
    )
}

async fn call_tool(
    server: Arc<ServerInner>,
    session: Arc<Session>,
    fields: Result<RequestFields, ErrorObject>,
    ctx: RequestContext,
) -> HandlerResult {
    server.ready().await;
    let (server, session) = (&server, &session);
    // The session read the params once; what the call needs is in its fields.
    let p = fields?;
    let Some(name) = p.name else {
        return Err(ErrorObject::invalid_params(
            "Invalid params: missing field `name`",
        ));
    };
    let tool = {
        let reg = server.registry();
        reg.tool_index.get(name.as_str()).map(|&i| {
            let t = &reg.tools[i];
            (
                t.call.clone(),
                t.def.task_support(),
                t.start,
                t.scopes.clone(),
            )
        })
    };
    let tool = match tool {
        Some((call, support, start, scopes)) => {
            check_scopes(&ctx, &scopes)?;
            Some((call, support, start))
        }
        None => None,
    };
    let modern = is_modern(&ctx);
    let retry = if modern {
        Some(Retry::read(p.input_responses.as_deref(), p.request_state)?)
    } else {
        None
    };
    let args = p.arguments;
    let Some((call, support, start)) = tool else {
        let fallback = server.registry().unknown_tool.clone();
        let Some(fallback) = fallback else {
            return Err(ErrorObject::invalid_params(format!("Unknown tool: {name}")));
        };
        let marker = complete_marker(&ctx);
        let Some(retry) = retry else {
            let version = ctx.protocol_version();
            return encode_legacy_call(fallback(ctx, name, args).await?, version);
        };
        // In rounds like a registered tool, so that what the fallback asks the client
        // (elicitation, sampling, roots) reaches it as an input request.
        let (bind_name, bind_args) = (name.clone(), args.clone());
        let binding = move || call_binding(&bind_name, bind_args.as_deref());
        return Box::pin(in_rounds(
            server,
            ctx,
            binding,
            retry.request_state,
            retry.input_responses,
            move |ctx| async move {
                let mut result = fallback(ctx, name, args).await?;
                result.result_type = marker;
                encode(&result)
            },
        ))
        .await;
    };
    let marker = complete_marker(&ctx);
    let Some(retry) = retry else {
        let version = ctx.protocol_version();
        // 2025-11-25 tasks: the client asks with `task`; the tool's taskSupport must agree.
        if version.is_some_and(ProtocolVersion::has_tasks) && server.offers_tasks() {
            if let Some(error) = tasks::legacy_mismatch(&name, support, p.task.is_some()) {
                return Err(error);
            }
            if let Some(task) = p.task {
                return tasks::call_as_legacy_task(server, session, ctx, call, args, &task);
            }
        }
        return encode_legacy_call(call(ctx, args).await?, version);
    };
    // The tasks extension: a task-capable tool becomes a task for a client that accepts
    // them (the legacy `task` param means nothing here); one that requires it is refused
    // to the others.
    let as_task = support != TaskSupport::Forbidden && tasks::accepts_tasks(&ctx);
    if support == TaskSupport::Required && !as_task {
        return Err(tasks::missing_extension(&format!("tool {name}")));
    }
    let raw_args = args.clone();
    let binding = move || call_binding(&name, raw_args.as_deref());
    let server_arc = server.clone();
    in_rounds(
        server,
        ctx,
        binding,
        retry.request_state,
        retry.input_responses,
        move |ctx| async move {
            if as_task {
                let task = tasks::call_as_task(&server_arc, ctx, call, args, start, support);
                return Box::pin(task).await;
            }
            let round = ctx.round.clone();
            let mut result = call(ctx, args).await?;
            if result.is_error()
                && let Some(error) = round.and_then(|r| r.missing_capabilities())
            {
                return Err(error);
            }
            result.result_type = marker;
            encode(&result)
        },
    )
    .await
}

/// Refuses a caller whose access token lacks one of `scopes`; callers no issuer vouches
/// for have no token to check.
fn check_scopes(ctx: &RequestContext, scopes: &[String]) -> Result<(), ErrorObject> {
    let Some(identity) = ctx.identity().filter(|i| i.issuer.is_some()) else {
        return Ok(());
    };
    if scopes.iter().all(|s| identity.has_scope(s)) {
        return Ok(());
    }
    Err(moat_transport::http::server::insufficient_scope(scopes))
}

/// A 2026-07-28 retry's fields: the client's answers and the state it echoes back.
struct Retry {
    input_responses: Option<BTreeMap<String, serde_json::Value>>,
    request_state: Option<String>,
}

impl Retry {
    /// Reads the answers from their slice of the params (refusing a malformed retry).
    fn read(
        input_responses: Option<&RawValue>,
        request_state: Option<String>,
    ) -> Result<Retry, ErrorObject> {
        moat_protocol::session::check_input_responses(input_responses)?;
        let input_responses = match input_responses {
            None => None,
            Some(raw) => Some(serde_json::from_str(raw.get()).map_err(|e| {
                ErrorObject::invalid_params(format!("Invalid params: inputResponses: {e}"))
            })?),
        };
        Ok(Retry {
            input_responses,
            request_state,
        })
    }
}

/// What a `tools/call`'s request state is bound to: the tool and its arguments.
fn call_binding(name: &str, raw_args: Option<&RawValue>) -> Binding {
    let args: Option<serde_json::Value> = raw_args.and_then(|a| serde_json::from_str(a.get()).ok());
    Binding::new(methods::TOOLS_CALL, name, args.as_ref())
}

/// Run a modern-era handler that may need input from the client: answer normally if it
/// finishes, or with an `InputRequiredResult` (and a sealed `requestState`) as soon as it
/// asks for something the client has not answered yet. A handler that fails after asking
/// for a capability the client did not declare gets `-32021` instead of its own error.
async fn in_rounds<B, F, Fut>(
    server: &ServerInner,
    mut ctx: RequestContext,
    binding: B,
    request_state: Option<String>,
    input_responses: Option<BTreeMap<String, serde_json::Value>>,
    run: F,
) -> HandlerResult
where
    B: FnOnce() -> Binding,
    F: FnOnce(RequestContext) -> Fut,
    Fut: std::future::Future<Output = HandlerResult>,
{
    // The binding (a digest of the arguments) is only worked out when a state is opened or
    // sealed: most calls never need input and should not pay for it.
    let mut make_binding = Some(binding);
    let mut binding: Option<Binding> = None;
    let mut bound = move || -> Binding {
        if let Some(make) = make_binding.take() {
            binding = Some(make());
        }
        binding
            .clone()
            .unwrap_or_else(|| Binding::new("", "", None))
    };
    let options = server.options();
    let key = &options.state_key;
    let mut answers = match request_state {
        Some(state) => mrtr::open(key, &options.retired_state_keys, &state, &bound())?,
        None => BTreeMap::new(),
    };
    // Answers sealed in the state were given in earlier rounds: a retry cannot change them.
    for (k, v) in input_responses.unwrap_or_default() {
        answers.entry(k).or_insert(v);
    }
    let round = Arc::new(Round::new(answers));
    ctx.round = Some(round.clone());
    tokio::select! {
        biased;
        result = run(ctx) => match result {
            Err(_) => round.missing_capabilities().map_or(result, Err),
            ok => ok,
        },
        stall = round.stalled() => match stall {
            Stall::Failed(error) => Err(error),
            Stall::NeedsInput(asked) => {
                let asked: InputRequests = asked.into_iter().collect();
                encode(&InputRequiredResult {
                    input_requests: Some(asked),
                    request_state: Some(mrtr::seal(key, &bound(), &round.used_answers())),
                    ..Default::default()
                })
            }
        },
    }
}

async fn read_resource(server: &ServerInner, uri: String, ctx: RequestContext) -> HandlerResult {
    if uri.starts_with(super::skills::SKILL_SCHEME) {
        let bundled = server
            .skills()
            .iter()
            .find_map(|s| s.read(&uri))
            .map(|c| vec![c]);
        let contents = match (bundled, server.skill_source()) {
            (Some(contents), _) => Some(contents),
            (None, Some(source)) => source.read(&ctx, &uri).await?,
            (None, None) => None,
        };
        if let Some(contents) = contents {
            let (result_type, ttl_ms, cache_scope) = server.cache_hints(&ctx);
            return encode(&ReadResourceResult {
                contents,
                result_type,
                ttl_ms,
                cache_scope,
                ..Default::default()
            });
        }
    }
    let (read, vars) = {
        let reg = server.registry();
        if let Some(entry) = reg.resources.iter().find(|r| r.def.uri == uri) {
            (Some(entry.read.clone()), HashMap::new())
        } else {
            reg.templates
                .iter()
                .find_map(|t| {
                    t.template
                        .matches(&uri)
                        .map(|vars| (Some(t.read.clone()), vars))
                })
                .unwrap_or((None, HashMap::new()))
        }
    };
    let Some(read) = read else {
        // -32002 until 2025-11-25; 2026-07-28 retired it for Invalid params (SEP-2164).
        let code = if is_modern(&ctx) {
            INVALID_PARAMS
        } else {
            RESOURCE_NOT_FOUND
        };
        return Err(ErrorObject::new(code, format!("Resource not found: {uri}"))
            .with_data(serde_json::json!({ "uri": uri })));
    };
    let (result_type, ttl_ms, cache_scope) = server.cache_hints(&ctx);
    let modern = is_modern(&ctx);
    let mut result = read(ResourceRequest { uri, vars, ctx })
        .await
        .map_err(|mut e| {
            // A handler's "not found" follows the revision's code, as ours does above.
            if modern && e.code == RESOURCE_NOT_FOUND {
                e.code = INVALID_PARAMS;
            }
            e
        })?;
    result.result_type = result_type;
    result.ttl_ms = ttl_ms;
    result.cache_scope = cache_scope;
    encode(&result)
}

/// The tasks extension's part of `subscriptions/listen` params.
#[derive(Deserialize, Default)]
struct ListenTasks {
    #[serde(default)]
    notifications: tasks_extension::TaskSubscription,
}

/// `subscriptions/listen` (2026-07-28): acknowledge what we will honour, then keep the
/// request open, delivering matching notifications tagged with its id, until the client
/// cancels it or the connection closes (a cancelled request gets no answer). With the
/// tasks extension, `taskIds` asks for `notifications/tasks` of those tasks: each one's
/// state now, then every change.
async fn listen(
    server: &Arc<ServerInner>,
    session: Arc<Session>,
    asked: SubscriptionFilter,
    asked_tasks: Vec<String>,
    ctx: RequestContext,
) -> HandlerResult {
    // Task notifications need the extension; the tasks named must exist. Anyone may hear
    // of a task whose id they hold, as anyone may poll it.
    if !asked_tasks.is_empty() && !tasks::accepts_tasks(&ctx) {
        return Err(tasks::missing_extension("task status notifications"));
    }
    let task_ids: Vec<String> = asked_tasks
        .into_iter()
        .filter(|id| server.tasks.extension_task(id).is_some())
        .collect();
    let caps = server.capabilities(ctx.protocol_version());
    let has_resources = caps.resources.is_some();
    let honoured = SubscriptionFilter {
        tools_list_changed: asked
            .tools_list_changed
            .filter(|&b| b && caps.tools.is_some()),
        prompts_list_changed: asked
            .prompts_list_changed
            .filter(|&b| b && caps.prompts.is_some()),
        resources_list_changed: asked.resources_list_changed.filter(|&b| b && has_resources),
        resource_subscriptions: asked.resource_subscriptions.filter(|_| has_resources),
    };
    let server_weak = Arc::downgrade(server);
    let id = ctx.request_id().clone();
    // A 2026-07-28 request's connection is held only while it listens (see `start_as`).
    server.hold(&session);
    session
        .listeners
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Listener {
            id: id.clone(),
            filter: honoured.clone(),
            // Once acknowledged.
            task_ids: Vec::new(),
        });
    let watched = honoured.resource_subscriptions.clone().unwrap_or_default();
    for uri in &watched {
        server.subscription_changed(uri, true);
    }
    let _guard = ListenGuard {
        session: session.clone(),
        id: id.clone(),
        server: server_weak,
        watched,
    };
    let ack = SubscriptionsAcknowledgedNotificationParams {
        notifications: honoured,
        meta: Some(stream_meta(&id)),
    };
    let mut ack = serde_json::to_value(&ack).unwrap_or_default();
    if !task_ids.is_empty()
        && let Some(n) = ack
            .get_mut("notifications")
            .and_then(serde_json::Value::as_object_mut)
    {
        n.insert("taskIds".to_owned(), serde_json::json!(task_ids));
    }
    let _ = ctx
        .peer()
        .notify_related(
            methods::NOTIFICATIONS_SUBSCRIPTIONS_ACKNOWLEDGED,
            &ack,
            Some(&id),
        )
        .await;
    if !task_ids.is_empty()
        && let Some(l) = session
            .listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .find(|l| l.id == id)
    {
        l.task_ids = task_ids.clone();
    }
    // Where each task stands now, so that one that finished before the stream opened is
    // heard of too.
    for task_id in &task_ids {
        if let Some(task) = server.tasks.extension_task(task_id) {
            let params = TaskStatusNotificationParams {
                task,
                meta: Some(stream_meta(&id)),
            };
            let _ = ctx
                .peer()
                .notify_related(tasks_extension::NOTIFICATIONS_TASKS, &params, Some(&id))
                .await;
        }
    }
    // Until the client cancels it, or its connection's input ends (a single-request HTTP
    // connection's input ends with its one request, and its stream lives on).
    if ctx.peer().is_single_request() {
        ctx.cancelled().await;
    } else {
        tokio::select! {
            _ = ctx.cancelled() => {}
            _ = ctx.peer().input_ended() => {}
        }
    }
    // The peer drops a cancelled request's answer; this result documents what a graceful
    // end of the stream would say.
    encode(&SubscriptionsListenResult {
        meta: Some(stream_meta(&id)),
        result_type: Some("complete".to_owned()),
    })
}

#[cfg(test)]
mod future_sizes {
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn future_size<F, Fut>(_: &F) -> usize
    where
        F: Fn(
            Arc<ServerInner>,
            Arc<Session>,
            Result<RequestFields, ErrorObject>,
            RequestContext,
        ) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// Each request's future is allocated and moved whole. With every method's handling
    /// inline, a tool call's was 10.7 KB; on its own, with its rare paths (the unknown-tool
    /// fallback, a call that becomes a task) boxed, it is 2.4 KB.
    #[test]
    fn a_tool_calls_future_stays_small() {
        let size = future_size(&call_tool);
        assert!(
            size <= 3 * 1024,
            "call_tool's future is {size} bytes: box the await that grew it"
        );
    }
}
