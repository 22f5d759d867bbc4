//! Resources and resource templates: what a handler returns and how it becomes contents.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use moat_protocol::ErrorObject;
use moat_protocol::types::{
    BlobResourceContents, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    TextResourceContents,
};

use super::template::UriTemplate;
use crate::handler::{BoxFuture, RequestContext};

/// Binary resource content; sent base64-encoded as a blob.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Blob(pub Vec<u8>);

/// An error a resource handler may return to say what kind of failure it was: a resource
/// that does not exist reaches the client as "Resource not found" (-32002; -32602 in
/// 2026-07-28, which retired -32002), anything else as an internal error (-32603). Handlers
/// returning any other error type get -32603.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResourceError {
    /// No such resource (or none this client may see).
    NotFound(String),
    /// The resource exists but could not be read.
    Failed(String),
}

impl std::fmt::Display for ResourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResourceError::NotFound(m) | ResourceError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ResourceError {}

/// What a resource handler may return.
pub trait ResourceOutput: Send + 'static {
    /// Convert into contents for `uri`, with the resource's declared MIME type if any.
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Vec<ResourceContents>;
}

impl ResourceOutput for String {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Vec<ResourceContents> {
        let mut c = TextResourceContents::new(uri, self);
        c.mime_type = Some(mime_type.unwrap_or("text/plain").to_owned());
        vec![ResourceContents::Text(c)]
    }
}

impl ResourceOutput for &'static str {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Vec<ResourceContents> {
        self.to_owned().into_contents(uri, mime_type)
    }
}

impl ResourceOutput for Blob {
    fn into_contents(self, uri: &str, mime_type: Option<&str>) -> Vec<ResourceContents> {
        let mut c = BlobResourceContents::new(uri, STANDARD.encode(self.0));
        c.mime_type = Some(mime_type.unwrap_or("application/octet-stream").to_owned());
        vec![ResourceContents::Blob(c)]
    }
}

impl ResourceOutput for ResourceContents {
    fn into_contents(self, _: &str, _: Option<&str>) -> Vec<ResourceContents> {
        vec![self]
    }
}

impl ResourceOutput for Vec<ResourceContents> {
    fn into_contents(self, _: &str, _: Option<&str>) -> Vec<ResourceContents> {
        self
    }
}

/// A read: the URI asked for, and for templates the variables it matched.
#[derive(Debug, Clone)]
pub struct ResourceRequest {
    /// The URI being read.
    pub uri: String,
    /// Template variables (empty for a fixed resource).
    pub vars: HashMap<String, String>,
    /// The request's context.
    pub ctx: RequestContext,
}

impl ResourceRequest {
    /// A template variable by name.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }
}

pub(crate) type ReadFn = Arc<
    dyn Fn(ResourceRequest) -> BoxFuture<Result<ReadResourceResult, ErrorObject>> + Send + Sync,
>;

#[derive(Clone)]
pub(crate) struct ResourceEntry {
    pub(crate) def: Resource,
    pub(crate) read: ReadFn,
}

#[derive(Clone)]
pub(crate) struct TemplateEntry {
    pub(crate) def: ResourceTemplate,
    pub(crate) template: UriTemplate,
    pub(crate) read: ReadFn,
}

/// A read handler as the registry keeps it: the output made contents, the error made the
/// JSON-RPC error to answer with.
pub(crate) fn make_read<O, F, Fut>(mime_type: Option<String>, f: F) -> ReadFn
where
    O: ResourceReturn,
    F: Fn(ResourceRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = O> + Send + 'static,
{
    let f = Arc::new(f);
    Arc::new(move |req: ResourceRequest| {
        let f = f.clone();
        let mime = mime_type.clone();
        Box::pin(async move {
            let uri = req.uri.clone();
            match f(req).await.into_result() {
                Ok(out) => Ok(ReadResourceResult {
                    contents: out.into_contents(&uri, mime.as_deref()),
                    ..Default::default()
                }),
                Err(e) => {
                    let kind: &dyn std::any::Any = &e;
                    Err(match kind.downcast_ref::<ResourceError>() {
                        Some(ResourceError::NotFound(m)) => ErrorObject::new(
                            moat_protocol::error::RESOURCE_NOT_FOUND,
                            format!("Resource not found: {uri}: {m}"),
                        )
                        .with_data(serde_json::json!({ "uri": uri })),
                        _ => match kind.downcast_ref::<ErrorObject>() {
                            Some(error) => error.clone(),
                            None => ErrorObject::internal(format!("Reading {uri} failed: {e}")),
                        },
                    })
                }
            }
        })
    })
}

/// What a resource handler returns: any [`ResourceOutput`], or a `Result` of one.
pub trait ResourceReturn: Send + 'static {
    /// The output on success.
    type Output: ResourceOutput;
    /// The error on failure ([`Infallible`] for a handler that returns its output itself).
    type Error: Display + Send + 'static;
    /// The output, or the error.
    fn into_result(self) -> Result<Self::Output, Self::Error>;
}

impl<T: ResourceOutput> ResourceReturn for T {
    type Output = T;
    type Error = Infallible;
    fn into_result(self) -> Result<T, Infallible> {
        Ok(self)
    }
}

impl<T: ResourceOutput, E: Display + Send + 'static> ResourceReturn for Result<T, E> {
    type Output = T;
    type Error = E;
    fn into_result(self) -> Result<T, E> {
        self
    }
}
