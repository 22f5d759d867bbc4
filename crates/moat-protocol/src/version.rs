//! Protocol revisions and version negotiation for both eras.
//!
//! This is the one place that knows how the revisions differ. Handlers ask a
//! [`ProtocolVersion`] what it supports instead of comparing date strings.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{ErrorObject, UNSUPPORTED_PROTOCOL_VERSION};

/// A released MCP revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// 2024-11-05: the first release; HTTP+SSE transport.
    V2024_11_05,
    /// 2025-03-26: Streamable HTTP, batching, tool annotations.
    V2025_03_26,
    /// 2025-06-18: structured tool output, elicitation; batching removed.
    V2025_06_18,
    /// 2025-11-25: tasks, icons, URL elicitation, SSE polling.
    V2025_11_25,
    /// 2026-07-28: stateless; no `initialize`; protocol data in `_meta`.
    V2026_07_28,
}

/// The two shapes of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Era {
    /// `initialize` → `notifications/initialized` → active; sessions over HTTP.
    Handshake,
    /// Stateless: every request carries its revision and capabilities in `_meta`.
    Modern,
}

/// `_meta` key: the revision a modern-era request is made in.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the client's capabilities for this request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: the client's implementation info.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: the log level the client wants for this request.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key of a result: the server's implementation info.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

impl ProtocolVersion {
    /// Every revision, oldest first.
    pub const ALL: [ProtocolVersion; 5] = [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2026_07_28,
    ];

    /// The newest revision.
    pub const LATEST: ProtocolVersion = ProtocolVersion::V2026_07_28;

    /// The newest revision that uses the `initialize` handshake.
    pub const LATEST_HANDSHAKE: ProtocolVersion = ProtocolVersion::V2025_11_25;

    /// The revision's date string, as it appears on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// Parse a date string; `None` for a revision we do not know.
    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Which era the revision belongs to.
    pub const fn era(self) -> Era {
        match self {
            ProtocolVersion::V2026_07_28 => Era::Modern,
            _ => Era::Handshake,
        }
    }

    /// JSON-RPC batches are part of 2025-03-26 only.
    pub const fn supports_batches(self) -> bool {
        matches!(self, ProtocolVersion::V2025_03_26)
    }

    /// Tool annotations (`readOnlyHint`, …) exist from 2025-03-26.
    pub fn has_tool_annotations(self) -> bool {
        self >= ProtocolVersion::V2025_03_26
    }

    /// `outputSchema` / `structuredContent`, elicitation and `title` fields exist from 2025-06-18.
    pub fn has_structured_output(self) -> bool {
        self >= ProtocolVersion::V2025_06_18
    }

    /// Elicitation exists from 2025-06-18.
    pub fn has_elicitation(self) -> bool {
        self >= ProtocolVersion::V2025_06_18
    }

    /// Audio content blocks exist from 2025-03-26.
    pub fn has_audio(self) -> bool {
        self >= ProtocolVersion::V2025_03_26
    }

    /// `resource_link` content blocks exist from 2025-06-18.
    pub fn has_resource_links(self) -> bool {
        self >= ProtocolVersion::V2025_06_18
    }

    /// Multi-select (array) and titled enum fields in elicitation forms exist from 2025-11-25.
    pub fn has_multi_select_elicitation(self) -> bool {
        self >= ProtocolVersion::V2025_11_25
    }

    /// Make content blocks valid for this revision: a block kind the revision lacks
    /// (audio before 2025-03-26, resource links before 2025-06-18) becomes a text block
    /// saying what it was, rather than a message the client must reject.
    pub fn downgrade_content(self, blocks: &mut [crate::types::ContentBlock]) {
        use crate::types::ContentBlock;
        for block in blocks {
            let replacement = match block {
                ContentBlock::Audio(a) if !self.has_audio() => format!(
                    "[{} audio, {} bytes base64; protocol revision {self} cannot carry audio]",
                    a.mime_type,
                    a.data.len()
                ),
                ContentBlock::ResourceLink(r) if !self.has_resource_links() => match &r.description
                {
                    Some(d) => format!("Resource {} ({}): {d}", r.uri, r.name),
                    None => format!("Resource {} ({})", r.uri, r.name),
                },
                _ => continue,
            };
            *block = ContentBlock::text(replacement);
        }
    }

    /// Tasks, icons and URL elicitation exist in 2025-11-25.
    pub fn has_tasks(self) -> bool {
        self == ProtocolVersion::V2025_11_25
    }

    /// Results carry `resultType` (and cacheable ones `ttlMs`/`cacheScope`) from 2026-07-28.
    pub fn has_result_type(self) -> bool {
        self >= ProtocolVersion::V2026_07_28
    }

    /// The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) applies from
    /// 2026-07-28 on; it replaces the 2025-11-25 tasks and is not defined before.
    pub fn has_tasks_extension(self) -> bool {
        self.era() == Era::Modern
    }

    /// Whether the revision defines `method` as a request a client sends to a server
    /// (counting the methods of the extensions moat implements). The modern era dropped the
    /// handshake, `ping`, `logging/setLevel` and `resources/(un)subscribe` (replaced by
    /// per-request `_meta` and `subscriptions/listen`); the 2025-11-25 tasks exist only in
    /// 2025-11-25, and the tasks extension (`tasks/get`, `tasks/update`, `tasks/cancel`; no
    /// `tasks/result` or `tasks/list`) from 2026-07-28 on.
    pub fn defines_client_request(self, method: &str) -> bool {
        use crate::types::methods as m;
        use crate::types::tasks_extension::TASKS_UPDATE;
        let modern = self.era() == Era::Modern;
        match method {
            m::INITIALIZE
            | m::PING
            | m::LOGGING_SET_LEVEL
            | m::RESOURCES_SUBSCRIBE
            | m::RESOURCES_UNSUBSCRIBE => !modern,
            m::SERVER_DISCOVER | m::SUBSCRIPTIONS_LISTEN => modern,
            m::TASKS_GET | m::TASKS_CANCEL => self.has_tasks() || self.has_tasks_extension(),
            TASKS_UPDATE => self.has_tasks_extension(),
            m::TASKS_RESULT | m::TASKS_LIST => self.has_tasks(),
            m::TOOLS_LIST
            | m::TOOLS_CALL
            | m::RESOURCES_LIST
            | m::RESOURCES_TEMPLATES_LIST
            | m::RESOURCES_READ
            | m::PROMPTS_LIST
            | m::PROMPTS_GET
            | m::COMPLETION_COMPLETE => true,
            // The Skills extension, in every revision that declares extensions.
            crate::types::skills::SKILLS_LIST
            | crate::types::skills::SKILLS_GET
            | crate::types::skills::RESOURCES_DIRECTORY_READ => true,
            _ => false,
        }
    }

    /// Servers may send requests to the client (sampling, elicitation, roots) on the
    /// connection in the handshake era; the modern era uses `InputRequiredResult` instead.
    pub fn server_requests_inline(self) -> bool {
        self.era() == Era::Handshake
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A date string that names no revision this crate knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown MCP protocol revision {0:?} (known: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28)"
)]
pub struct UnknownVersion(pub String);

impl FromStr for ProtocolVersion {
    type Err = UnknownVersion;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProtocolVersion::parse(s).ok_or_else(|| UnknownVersion(s.to_owned()))
    }
}

impl Serialize for ProtocolVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        ProtocolVersion::parse(&s).ok_or_else(|| serde::de::Error::custom(UnknownVersion(s.into())))
    }
}

/// What a client wants to speak: one revision, or `auto` (modern first, then the handshake).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum VersionPreference {
    /// Try 2026-07-28 (`server/discover`); fall back to the newest handshake revision.
    #[default]
    Auto,
    /// Speak exactly this revision.
    Exact(ProtocolVersion),
}

impl FromStr for VersionPreference {
    type Err = UnknownVersion;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("auto") {
            Ok(VersionPreference::Auto)
        } else {
            s.parse().map(VersionPreference::Exact)
        }
    }
}

/// The set of revisions one side is willing to speak. Cheap to clone (each connection
/// takes a copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupportedVersions(std::sync::Arc<[ProtocolVersion]>);

impl Default for SupportedVersions {
    fn default() -> Self {
        SupportedVersions(ProtocolVersion::ALL.into())
    }
}

impl SupportedVersions {
    /// A set from a list; order does not matter.
    pub fn new(mut versions: Vec<ProtocolVersion>) -> Self {
        versions.sort();
        versions.dedup();
        SupportedVersions(versions.into())
    }

    /// Whether `v` is in the set.
    pub fn contains(&self, v: ProtocolVersion) -> bool {
        self.0.contains(&v)
    }

    /// The revisions, oldest first.
    pub fn as_slice(&self) -> &[ProtocolVersion] {
        &self.0
    }

    /// The newest handshake-era revision in the set.
    pub fn latest_handshake(&self) -> Option<ProtocolVersion> {
        self.0
            .iter()
            .rev()
            .copied()
            .find(|v| v.era() == Era::Handshake)
    }

    /// Whether the set includes a modern-era revision.
    pub fn has_modern(&self) -> bool {
        self.0.iter().any(|v| v.era() == Era::Modern)
    }

    /// Server side of the handshake: echo the client's revision if we speak it, otherwise
    /// counter-offer our newest handshake revision (the client decides whether to go on).
    /// `None` when the set has no handshake revision at all.
    pub fn negotiate_handshake(&self, requested: &str) -> Option<ProtocolVersion> {
        match ProtocolVersion::parse(requested) {
            Some(v) if v.era() == Era::Handshake && self.contains(v) => Some(v),
            _ => self.latest_handshake(),
        }
    }

    /// Client side of the handshake: accept the server's answer only if we speak it.
    pub fn accept_handshake(&self, answered: &str) -> Result<ProtocolVersion, NegotiationError> {
        match ProtocolVersion::parse(answered) {
            Some(v) if v.era() == Era::Handshake && self.contains(v) => Ok(v),
            _ => Err(NegotiationError::Unsupported {
                offered: answered.to_owned(),
                supported: self.strings(),
            }),
        }
    }

    /// Server side of the modern era: the revision a request names in `_meta`.
    pub fn check_modern(&self, requested: &str) -> Result<ProtocolVersion, ErrorObject> {
        match ProtocolVersion::parse(requested) {
            Some(v) if v.era() == Era::Modern && self.contains(v) => Ok(v),
            _ => Err(self.unsupported_error(requested)),
        }
    }

    /// The -32022 error naming what we support.
    pub fn unsupported_error(&self, requested: &str) -> ErrorObject {
        ErrorObject::new(
            UNSUPPORTED_PROTOCOL_VERSION,
            format!("Unsupported protocol version: {requested}"),
        )
        .with_data(json!({ "requested": requested, "supported": self.strings() }))
    }

    /// The date strings, oldest first.
    pub fn strings(&self) -> Vec<String> {
        self.0.iter().map(|v| v.as_str().to_owned()).collect()
    }

    /// Client side of the modern era: pick the newest revision both sides speak from a
    /// `server/discover` answer or a -32022 error's `supported` list.
    pub fn pick_common<'a>(
        &self,
        offered: impl IntoIterator<Item = &'a str>,
    ) -> Option<ProtocolVersion> {
        offered
            .into_iter()
            .filter_map(ProtocolVersion::parse)
            .filter(|v| self.contains(*v))
            .max()
    }
}

/// Negotiation failed: the peers share no revision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NegotiationError {
    /// The server answered with a revision we do not speak.
    #[error("the server answered with protocol revision {offered:?}, which this client does not speak (supported: {})", supported.join(", "))]
    Unsupported {
        /// What the server answered.
        offered: String,
        /// What we speak.
        supported: Vec<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_echoes_known_and_counter_offers_unknown() {
        let all = SupportedVersions::default();
        assert_eq!(
            all.negotiate_handshake("2025-06-18"),
            Some(ProtocolVersion::V2025_06_18)
        );
        assert_eq!(
            all.negotiate_handshake("1999-01-01"),
            Some(ProtocolVersion::V2025_11_25)
        );
        // A modern revision is not negotiated through `initialize`.
        assert_eq!(
            all.negotiate_handshake("2026-07-28"),
            Some(ProtocolVersion::V2025_11_25)
        );
        let old = SupportedVersions::new(vec![ProtocolVersion::V2024_11_05]);
        assert_eq!(
            old.negotiate_handshake("2025-11-25"),
            Some(ProtocolVersion::V2024_11_05)
        );
    }

    #[test]
    fn client_refuses_what_it_cannot_speak() {
        let ours = SupportedVersions::new(vec![ProtocolVersion::V2025_06_18]);
        assert!(ours.accept_handshake("2025-06-18").is_ok());
        assert!(ours.accept_handshake("2024-11-05").is_err());
        assert!(ours.accept_handshake("garbage").is_err());
    }

    #[test]
    fn modern_unsupported_is_32022_with_data() {
        let ours = SupportedVersions::default();
        assert!(ours.check_modern("2026-07-28").is_ok());
        let err = ours.check_modern("2030-01-01").unwrap_err();
        assert_eq!(err.code, -32022);
        let data = err.data.unwrap();
        assert_eq!(data["requested"], "2030-01-01");
        assert_eq!(data["supported"].as_array().unwrap().len(), 5);
        assert_eq!(
            ours.pick_common(["2025-11-25", "2026-07-28", "2031-01-01"]),
            Some(ProtocolVersion::V2026_07_28)
        );
    }

    #[test]
    fn the_modern_era_drops_handshake_methods() {
        let modern = ProtocolVersion::V2026_07_28;
        let old = ProtocolVersion::V2024_11_05;
        for m in [
            "ping",
            "initialize",
            "logging/setLevel",
            "resources/subscribe",
        ] {
            assert!(!modern.defines_client_request(m), "{m}");
            assert!(old.defines_client_request(m), "{m}");
        }
        assert!(modern.defines_client_request("subscriptions/listen"));
        assert!(!old.defines_client_request("server/discover"));
        let v1 = ProtocolVersion::V2025_11_25;
        for m in ["tasks/get", "tasks/cancel", "tasks/result", "tasks/list"] {
            assert!(v1.defines_client_request(m), "{m}");
            assert!(!old.defines_client_request(m), "{m}");
        }
        assert!(!v1.defines_client_request("tasks/update"));
        // The tasks extension: get, update and cancel; result and list are gone.
        for m in ["tasks/get", "tasks/update", "tasks/cancel"] {
            assert!(modern.defines_client_request(m), "{m}");
        }
        assert!(!modern.defines_client_request("tasks/result"));
        assert!(!modern.defines_client_request("tasks/list"));
        assert!(!modern.defines_client_request("no/such"));
    }

    #[test]
    fn old_revisions_get_text_instead_of_unknown_blocks() {
        use crate::types::{AudioContent, ContentBlock, Resource};
        let mut blocks = vec![
            ContentBlock::Audio(AudioContent::new("UklG", "audio/wav")),
            ContentBlock::ResourceLink(Resource::new("file:///a", "a")),
            ContentBlock::text("kept"),
        ];
        ProtocolVersion::V2025_06_18.downgrade_content(&mut blocks);
        assert!(matches!(blocks[0], ContentBlock::Audio(_)));
        assert!(matches!(blocks[1], ContentBlock::ResourceLink(_)));
        ProtocolVersion::V2024_11_05.downgrade_content(&mut blocks);
        assert!(blocks[0].as_text().unwrap().contains("cannot carry audio"));
        assert_eq!(blocks[1].as_text(), Some("Resource file:///a (a)"));
        assert_eq!(blocks[2].as_text(), Some("kept"));
    }

    #[test]
    fn only_2025_03_26_batches() {
        for v in ProtocolVersion::ALL {
            assert_eq!(v.supports_batches(), v == ProtocolVersion::V2025_03_26);
        }
    }
}
