//! Everything moat serializes must validate against the official schema of each revision that
//! defines it. Instances are built per revision: only the content a revision allows, and for
//! 2026-07-28 the `resultType` / `ttlMs` / `cacheScope` and request `_meta` it requires.
//!
//! The spec lives at `$MOAT_SPEC_DIR`, or by default in the repository's `spec/` (its
//! README says where it comes from).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::path::{Path, PathBuf};

use moat_protocol::types::*;
use moat_protocol::{Meta, RequestId};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Rev {
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

use Rev::*;

const REVS: [Rev; 5] = [
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
];

impl Rev {
    fn name(self) -> &'static str {
        match self {
            V2024_11_05 => "2024-11-05",
            V2025_03_26 => "2025-03-26",
            V2025_06_18 => "2025-06-18",
            V2025_11_25 => "2025-11-25",
            V2026_07_28 => "2026-07-28",
        }
    }

    fn defs_key(self) -> &'static str {
        if self >= V2025_11_25 {
            "$defs"
        } else {
            "definitions"
        }
    }

    fn modern(self) -> bool {
        self == V2026_07_28
    }
}

fn spec_dir() -> PathBuf {
    let dir = match std::env::var_os("MOAT_SPEC_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec"),
    };
    assert!(
        dir.join("2026-07-28/schema.json").is_file(),
        "MCP spec directory not found at {} (set MOAT_SPEC_DIR)",
        dir.display()
    );
    dir
}

struct Schemas {
    roots: HashMap<Rev, Value>,
    validators: HashMap<(Rev, String), jsonschema::Validator>,
}

impl Schemas {
    fn load() -> Schemas {
        let dir = spec_dir();
        let roots = REVS
            .iter()
            .map(|&rev| {
                let path = dir.join(rev.name()).join("schema.json");
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                (rev, serde_json::from_str(&text).expect("schema is JSON"))
            })
            .collect();
        Schemas {
            roots,
            validators: HashMap::new(),
        }
    }

    /// The JSON pointer (below the definitions) of `def` in `rev`, trying the fallbacks (e.g.
    /// the inline `params` of a request in revisions without a separate params definition).
    fn locate(&self, rev: Rev, target: &Target) -> Option<String> {
        let defs = &self.roots[&rev][rev.defs_key()];
        std::iter::once(target.def)
            .chain(target.fallbacks.iter().copied())
            .find(|path| defs.pointer(&format!("/{path}")).is_some())
            .map(str::to_owned)
    }

    fn validator(&mut self, rev: Rev, path: &str) -> &jsonschema::Validator {
        let root = &self.roots[&rev];
        self.validators
            .entry((rev, path.to_owned()))
            .or_insert_with(|| {
                let key = rev.defs_key();
                let schema = json!({
                    "$schema": root["$schema"],
                    "$ref": format!("#/{key}/{path}"),
                    key: root[key],
                });
                jsonschema::validator_for(&schema)
                    .unwrap_or_else(|e| panic!("{} {path}: bad schema: {e}", rev.name()))
            })
    }
}

/// What to validate: a schema definition name, with fallback pointers for revisions that
/// define the shape inline.
struct Target {
    def: &'static str,
    fallbacks: &'static [&'static str],
}

/// Serialize `x`, check it decodes back to itself, and return the JSON.
fn case<T: Serialize + DeserializeOwned + PartialEq + Debug>(x: T) -> Value {
    let v = serde_json::to_value(&x).expect("serialize");
    let back: T = serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("decode {v}: {e}"));
    assert_eq!(back, x, "round trip of {v}");
    v
}

fn obj(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

/// Minimal request `_meta`: required in 2026-07-28, absent before.
fn req_meta(rev: Rev) -> Option<Meta> {
    rev.modern().then(|| {
        obj(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }))
    })
}

/// Full request `_meta`: a progress token, and in 2026-07-28 everything it defines.
fn req_meta_full(rev: Rev) -> Option<Meta> {
    if rev.modern() {
        Some(obj(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {"form": {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "io.modelcontextprotocol/logLevel": "info",
            "progressToken": "p-1",
        })))
    } else {
        Some(obj(json!({"progressToken": 7})))
    }
}

fn any_meta() -> Option<Meta> {
    Some(obj(json!({"com.example/x": 1})))
}

fn result_type(rev: Rev) -> Option<String> {
    rev.modern().then(|| RESULT_TYPE_COMPLETE.to_owned())
}

fn ttl(rev: Rev) -> Option<u64> {
    rev.modern().then_some(60_000)
}

fn scope(rev: Rev) -> Option<CacheScope> {
    rev.modern().then_some(CacheScope::Private)
}

fn icons() -> Option<Vec<Icon>> {
    Some(vec![
        Icon::new("https://example.com/i.png"),
        Icon {
            src: "data:image/png;base64,AAAA".into(),
            mime_type: Some("image/png".into()),
            sizes: Some(vec!["48x48".into(), "any".into()]),
            theme: Some(IconTheme::Dark),
        },
    ])
}

fn annotations(rev: Rev) -> Option<Annotations> {
    Some(Annotations {
        audience: Some(vec![Role::User, Role::Assistant]),
        priority: Some(0.5),
        last_modified: (rev >= V2025_06_18).then(|| "2025-01-12T15:00:58Z".into()),
    })
}

fn implementation(full: bool) -> Implementation {
    if !full {
        return Implementation::new("moat", "0.1.0");
    }
    Implementation {
        title: Some("Moat".into()),
        description: Some("An MCP stack".into()),
        icons: icons(),
        website_url: Some("https://example.com".into()),
        ..Implementation::new("moat", "0.1.0")
    }
}

fn text_resource() -> TextResourceContents {
    TextResourceContents {
        mime_type: Some("text/plain".into()),
        ..TextResourceContents::new("file:///a.txt", "hello")
    }
}

fn blob_resource() -> BlobResourceContents {
    BlobResourceContents {
        mime_type: Some("image/png".into()),
        ..BlobResourceContents::new("file:///a.png", "AAAA")
    }
}

fn resource(full: bool) -> Resource {
    if !full {
        return Resource::new("file:///a.txt", "a.txt");
    }
    Resource {
        title: Some("A".into()),
        description: Some("a file".into()),
        mime_type: Some("text/plain".into()),
        size: Some(5),
        annotations: None,
        icons: icons(),
        meta: any_meta(),
        ..Resource::new("file:///a.txt", "a.txt")
    }
}

/// Every content block the revision allows, bare and annotated.
fn blocks(rev: Rev) -> Vec<ContentBlock> {
    let meta = (rev >= V2025_06_18).then(any_meta).flatten();
    let mut v = vec![
        ContentBlock::text("hi"),
        ContentBlock::Text(TextContent {
            annotations: annotations(rev),
            meta: meta.clone(),
            ..TextContent::new("annotated")
        }),
        ContentBlock::image("AAAA", "image/png"),
        ContentBlock::Image(ImageContent {
            annotations: annotations(rev),
            meta: meta.clone(),
            ..ImageContent::new("AAAA", "image/png")
        }),
        ContentBlock::resource(text_resource()),
        ContentBlock::Resource(EmbeddedResource {
            annotations: annotations(rev),
            meta: meta.clone(),
            ..EmbeddedResource::new(blob_resource())
        }),
    ];
    if rev >= V2025_03_26 {
        v.push(ContentBlock::audio("AAAA", "audio/wav"));
    }
    if rev >= V2025_06_18 {
        v.push(ContentBlock::resource_link(resource(false)));
        v.push(ContentBlock::resource_link(Resource {
            annotations: annotations(rev),
            ..resource(true)
        }));
    }
    v
}

/// Every sampling block the revision allows.
fn sampling_blocks(rev: Rev) -> Vec<SamplingMessageContentBlock> {
    let mut v = vec![
        SamplingMessageContentBlock::text("hi"),
        SamplingMessageContentBlock::Image(ImageContent::new("AAAA", "image/png")),
    ];
    if rev >= V2025_03_26 {
        v.push(SamplingMessageContentBlock::Audio(AudioContent::new(
            "AAAA",
            "audio/wav",
        )));
    }
    if rev >= V2025_11_25 {
        v.push(SamplingMessageContentBlock::ToolUse(ToolUseContent {
            id: "call_1".into(),
            name: "get_weather".into(),
            input: obj(json!({"city": "Paris"})),
            meta: any_meta(),
        }));
        v.push(SamplingMessageContentBlock::ToolResult(ToolResultContent {
            tool_use_id: "call_1".into(),
            content: vec![ContentBlock::text("18C")],
            structured_content: Some(json!({"temperature": 18})),
            is_error: Some(false),
            meta: any_meta(),
        }));
    }
    v
}

fn sampling_contents(rev: Rev) -> Vec<SamplingContent> {
    let mut v: Vec<SamplingContent> = sampling_blocks(rev)
        .into_iter()
        .map(SamplingContent::from)
        .collect();
    if rev >= V2025_11_25 {
        v.push(SamplingContent::Multiple(sampling_blocks(rev)));
    }
    v
}

fn tools(rev: Rev) -> Vec<Tool> {
    let mut full = Tool::new(
        "get_weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )
    .with_title("Weather")
    .with_description("Get the weather")
    .with_annotations(ToolAnnotations {
        title: Some("Weather".into()),
        read_only_hint: Some(true),
        destructive_hint: Some(false),
        idempotent_hint: Some(true),
        open_world_hint: Some(true),
    })
    .with_output_schema(json!({"type": "object", "properties": {"t": {"type": "number"}}}));
    full.icons = icons();
    full.meta = any_meta();
    if rev == V2025_11_25 {
        full.execution = Some(ToolExecution {
            task_support: Some(TaskSupport::Optional),
        });
    }
    vec![Tool::new("noop", json!({"type": "object"})), full]
}

fn prompts() -> Vec<Prompt> {
    vec![
        Prompt::new("p"),
        Prompt {
            title: Some("P".into()),
            description: Some("a prompt".into()),
            arguments: Some(vec![
                PromptArgument::new("a"),
                PromptArgument {
                    title: Some("A".into()),
                    description: Some("arg".into()),
                    required: Some(true),
                    ..PromptArgument::new("b")
                },
            ]),
            icons: icons(),
            meta: any_meta(),
            ..Prompt::new("p2")
        },
    ]
}

fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("file:///{path}", "files"),
        ResourceTemplate {
            title: Some("Files".into()),
            description: Some("project files".into()),
            mime_type: Some("text/plain".into()),
            annotations: annotations(V2025_06_18),
            icons: icons(),
            meta: any_meta(),
            ..ResourceTemplate::new("file:///{path}", "files")
        },
    ]
}

fn client_caps(rev: Rev, full: bool) -> ClientCapabilities {
    if !full {
        return ClientCapabilities::default();
    }
    let empty = || Some(serde_json::Map::new());
    ClientCapabilities {
        experimental: Some(obj(json!({"x": {"y": 1}}))),
        extensions: rev
            .modern()
            .then(|| obj(json!({"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html"]}}))),
        roots: Some(RootsCapability {
            list_changed: (!rev.modern()).then_some(true),
            ..Default::default()
        }),
        sampling: Some(SamplingCapability {
            context: (rev >= V2025_11_25).then(empty).flatten(),
            tools: (rev >= V2025_11_25).then(empty).flatten(),
            ..Default::default()
        }),
        elicitation: (rev >= V2025_06_18).then(|| ElicitationCapability {
            form: (rev >= V2025_11_25).then(empty).flatten(),
            url: (rev >= V2025_11_25).then(empty).flatten(),
            ..Default::default()
        }),
        tasks: (rev == V2025_11_25).then(|| TasksCapability {
            list: empty(),
            cancel: empty(),
            requests: Some(TaskRequestsCapability {
                sampling: Some(TaskSamplingCapability {
                    create_message: empty(),
                    ..Default::default()
                }),
                elicitation: Some(TaskElicitationCapability {
                    create: empty(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        extra: serde_json::Map::new(),
    }
}

fn server_caps(rev: Rev, full: bool) -> ServerCapabilities {
    if !full {
        return ServerCapabilities::default();
    }
    let empty = || Some(serde_json::Map::new());
    ServerCapabilities {
        experimental: Some(obj(json!({"x": {}}))),
        extensions: rev
            .modern()
            .then(|| obj(json!({"io.modelcontextprotocol/tasks": {}}))),
        logging: empty(),
        completions: (rev >= V2025_03_26).then(empty).flatten(),
        prompts: Some(PromptsCapability {
            list_changed: Some(true),
            ..Default::default()
        }),
        resources: Some(ResourcesCapability {
            subscribe: Some(true),
            list_changed: Some(true),
            ..Default::default()
        }),
        tools: Some(ToolsCapability {
            list_changed: Some(false),
            ..Default::default()
        }),
        tasks: (rev == V2025_11_25).then(|| TasksCapability {
            list: empty(),
            cancel: empty(),
            requests: Some(TaskRequestsCapability {
                tools: Some(TaskToolsCapability {
                    call: empty(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        extra: serde_json::Map::new(),
    }
}

fn requested_schema(rev: Rev) -> RequestedSchema {
    let mut properties = BTreeMap::new();
    properties.insert(
        "name".to_owned(),
        PrimitiveSchemaDefinition::String(StringSchema::default()),
    );
    properties.insert(
        "email".to_owned(),
        PrimitiveSchemaDefinition::String(StringSchema {
            title: Some("Email".into()),
            description: Some("Your email".into()),
            min_length: Some(3),
            max_length: Some(50),
            format: Some(StringFormat::Email),
            default: (rev >= V2025_11_25).then(|| "a@b.c".into()),
            ..Default::default()
        }),
    );
    properties.insert(
        "age".to_owned(),
        PrimitiveSchemaDefinition::Number(NumberSchema {
            r#type: NumberType::Integer,
            title: Some("Age".into()),
            minimum: Some(0.0),
            maximum: Some(150.0),
            default: (rev >= V2025_11_25).then_some(30.0),
            ..Default::default()
        }),
    );
    properties.insert(
        "ratio".to_owned(),
        PrimitiveSchemaDefinition::Number(NumberSchema {
            minimum: Some(0.5),
            ..Default::default()
        }),
    );
    properties.insert(
        "ok".to_owned(),
        PrimitiveSchemaDefinition::Boolean(BooleanSchema {
            title: Some("OK".into()),
            description: Some("ok?".into()),
            default: Some(true),
            ..Default::default()
        }),
    );
    properties.insert(
        "legacy".to_owned(),
        PrimitiveSchemaDefinition::LegacyTitled(LegacyTitledEnumSchema {
            values: vec!["r".into(), "g".into()],
            enum_names: Some(vec!["Red".into(), "Green".into()]),
            title: Some("Color".into()),
            ..Default::default()
        }),
    );
    if rev >= V2025_11_25 {
        let options = || {
            vec![
                EnumOption {
                    value: "r".into(),
                    title: "Red".into(),
                },
                EnumOption {
                    value: "g".into(),
                    title: "Green".into(),
                },
            ]
        };
        properties.insert(
            "single".to_owned(),
            PrimitiveSchemaDefinition::UntitledSingleSelect(UntitledSingleSelectEnumSchema {
                values: vec!["a".into(), "b".into()],
                default: Some("a".into()),
                ..Default::default()
            }),
        );
        properties.insert(
            "titled".to_owned(),
            PrimitiveSchemaDefinition::TitledSingleSelect(TitledSingleSelectEnumSchema {
                one_of: options(),
                default: Some("r".into()),
                title: Some("Color".into()),
                ..Default::default()
            }),
        );
        properties.insert(
            "multi".to_owned(),
            PrimitiveSchemaDefinition::UntitledMultiSelect(UntitledMultiSelectEnumSchema {
                items: UntitledEnumItems {
                    values: vec!["a".into(), "b".into()],
                    ..Default::default()
                },
                min_items: Some(1),
                max_items: Some(2),
                default: Some(vec!["a".into()]),
                ..Default::default()
            }),
        );
        properties.insert(
            "titled_multi".to_owned(),
            PrimitiveSchemaDefinition::TitledMultiSelect(TitledMultiSelectEnumSchema {
                items: TitledEnumItems { any_of: options() },
                description: Some("pick".into()),
                ..Default::default()
            }),
        );
    }
    RequestedSchema {
        schema: (rev >= V2025_11_25).then(|| "https://json-schema.org/draft/2020-12/schema".into()),
        properties,
        required: Some(vec!["name".into()]),
        ..Default::default()
    }
}

fn elicit_params(rev: Rev) -> Vec<ElicitRequestParams> {
    let mut v = vec![
        ElicitRequestParams::Form(ElicitRequestFormParams::new(
            "Name?",
            RequestedSchema::default(),
        )),
        ElicitRequestParams::Form(ElicitRequestFormParams {
            mode: (rev >= V2025_11_25).then_some(FormModeTag),
            task: (rev == V2025_11_25).then(TaskMetadata::default),
            meta: any_meta(),
            ..ElicitRequestFormParams::new("Details?", requested_schema(rev))
        }),
    ];
    if rev >= V2025_11_25 {
        v.push(ElicitRequestParams::Url(ElicitRequestURLParams {
            message: "Open this".into(),
            url: "https://example.com/auth".into(),
            elicitation_id: Some("e-1".into()),
            ..Default::default()
        }));
    }
    v
}

fn elicit_results(rev: Rev) -> Vec<ElicitResult> {
    let mut content = BTreeMap::new();
    content.insert("name".to_owned(), ElicitValue::String("octocat".into()));
    content.insert("age".to_owned(), ElicitValue::Integer(30));
    content.insert("ok".to_owned(), ElicitValue::Boolean(true));
    if rev >= V2025_11_25 {
        content.insert(
            "multi".to_owned(),
            ElicitValue::StringArray(vec!["a".into()]),
        );
    }
    vec![
        ElicitResult::accept(content),
        ElicitResult::decline(),
        ElicitResult {
            meta: (rev < V2026_07_28).then(any_meta).flatten(),
            ..ElicitResult::cancel()
        },
    ]
}

fn create_message_params(rev: Rev) -> Vec<CreateMessageRequestParams> {
    let messages = sampling_contents(rev)
        .into_iter()
        .map(|content| SamplingMessage {
            role: Role::User,
            content,
            meta: (rev >= V2025_11_25).then(any_meta).flatten(),
        })
        .chain([
            SamplingMessage::user_text("q"),
            SamplingMessage::assistant_text("a"),
        ])
        .collect();
    vec![
        CreateMessageRequestParams {
            messages: vec![SamplingMessage::user_text("hi")],
            max_tokens: 100,
            ..Default::default()
        },
        CreateMessageRequestParams {
            messages,
            model_preferences: Some(ModelPreferences {
                hints: Some(vec![
                    ModelHint::default(),
                    ModelHint {
                        name: Some("sonnet".into()),
                    },
                ]),
                cost_priority: Some(0.3),
                speed_priority: Some(1.0),
                intelligence_priority: Some(0.0),
            }),
            system_prompt: Some("be nice".into()),
            include_context: Some(IncludeContext::ThisServer),
            temperature: Some(0.7),
            max_tokens: 1000,
            stop_sequences: Some(vec!["\n\n".into()]),
            metadata: Some(obj(json!({"k": "v"}))),
            tools: (rev >= V2025_11_25).then(|| tools(rev)),
            tool_choice: (rev >= V2025_11_25).then_some(ToolChoice {
                mode: Some(ToolChoiceMode::Required),
            }),
            task: (rev == V2025_11_25).then_some(TaskMetadata { ttl: Some(1000) }),
            meta: (!rev.modern()).then(|| req_meta_full(rev)).flatten(),
        },
    ]
}

fn create_message_results(rev: Rev) -> Vec<CreateMessageResult> {
    sampling_contents(rev)
        .into_iter()
        .map(|content| CreateMessageResult {
            role: Role::Assistant,
            content,
            model: "m".into(),
            stop_reason: Some("endTurn".into()),
            meta: any_meta(),
        })
        .chain([CreateMessageResult {
            role: Role::Assistant,
            content: SamplingMessageContentBlock::text("x").into(),
            model: "m".into(),
            stop_reason: None,
            meta: None,
        }])
        .collect()
}

fn task(status: TaskStatus, full: bool) -> Task {
    Task {
        task_id: "t-1".into(),
        status,
        status_message: full.then(|| "working hard".into()),
        created_at: "2025-11-25T10:00:00Z".into(),
        last_updated_at: "2025-11-25T10:00:01Z".into(),
        ttl: full.then_some(60_000),
        poll_interval: full.then_some(500),
    }
}

fn vals<T: Serialize + DeserializeOwned + PartialEq + Debug>(
    xs: impl IntoIterator<Item = T>,
) -> Vec<Value> {
    xs.into_iter().map(case).collect()
}

type Cases = fn(Rev) -> Vec<Value>;

/// (definition, fallback pointers, instances).
fn targets() -> Vec<(Target, Cases)> {
    macro_rules! t {
        ($def:literal, [$($fb:literal),*], $cases:expr) => {
            (Target { def: $def, fallbacks: &[$($fb),*] }, $cases as Cases)
        };
    }
    vec![
        // ---- lifecycle
        t!(
            "InitializeRequestParams",
            ["InitializeRequest/properties/params"],
            |rev| vals([
                InitializeRequestParams {
                    protocol_version: rev.name().into(),
                    capabilities: client_caps(rev, false),
                    client_info: implementation(false),
                    meta: None,
                },
                InitializeRequestParams {
                    protocol_version: rev.name().into(),
                    capabilities: client_caps(rev, true),
                    client_info: implementation(true),
                    meta: req_meta_full(rev),
                },
            ])
        ),
        t!("InitializeResult", [], |rev| vals([
            InitializeResult {
                protocol_version: rev.name().into(),
                capabilities: server_caps(rev, false),
                server_info: implementation(false),
                instructions: None,
                meta: None,
            },
            InitializeResult {
                protocol_version: rev.name().into(),
                capabilities: server_caps(rev, true),
                server_info: implementation(true),
                instructions: Some("use tools".into()),
                meta: any_meta(),
            },
        ])),
        t!("DiscoverResult", [], |rev| {
            let mut full = DiscoverResult {
                supported_versions: vec!["2026-07-28".into(), "2025-11-25".into()],
                capabilities: server_caps(rev, true),
                instructions: Some("hi".into()),
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: Some(CacheScope::Public),
                ..Default::default()
            };
            full.set_server_info(&implementation(true));
            assert_eq!(full.server_info(), Some(implementation(true)));
            vals([
                DiscoverResult {
                    supported_versions: vec!["2026-07-28".into()],
                    result_type: result_type(rev),
                    ttl_ms: ttl(rev),
                    cache_scope: scope(rev),
                    ..Default::default()
                },
                full,
            ])
        }),
        t!("RequestParams", ["PingRequest/properties/params"], |rev| {
            vals([
                RequestParams {
                    meta: req_meta(rev),
                },
                RequestParams {
                    meta: req_meta_full(rev),
                },
            ])
        }),
        t!("ClientCapabilities", [], |rev| vals([
            client_caps(rev, false),
            client_caps(rev, true)
        ])),
        t!("ServerCapabilities", [], |rev| vals([
            server_caps(rev, false),
            server_caps(rev, true)
        ])),
        t!("Implementation", [], |_| vals([
            implementation(false),
            implementation(true)
        ])),
        t!("EmptyResult", [], |rev| vals([
            EmptyResult {
                result_type: result_type(rev),
                ..Default::default()
            },
            EmptyResult {
                result_type: result_type(rev),
                meta: any_meta(),
            },
        ])),
        // ---- pagination
        t!(
            "PaginatedRequestParams",
            ["PaginatedRequest/properties/params"],
            |rev| vals([
                PaginatedRequestParams {
                    cursor: None,
                    meta: req_meta(rev),
                },
                PaginatedRequestParams {
                    cursor: Some("c-2".into()),
                    meta: req_meta_full(rev),
                },
            ])
        ),
        t!("PaginatedResult", [], |rev| vals([
            PaginatedResult {
                result_type: result_type(rev),
                ..Default::default()
            },
            PaginatedResult {
                next_cursor: Some("n".into()),
                meta: any_meta(),
                result_type: result_type(rev),
            },
        ])),
        // ---- tools
        t!("Tool", [], |rev| vals(tools(rev))),
        t!("ListToolsResult", [], |rev| vals([
            ListToolsResult {
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: scope(rev),
                ..Default::default()
            },
            ListToolsResult {
                tools: tools(rev),
                next_cursor: Some("n".into()),
                meta: any_meta(),
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: Some(CacheScope::Public),
            },
        ])),
        t!(
            "CallToolRequestParams",
            ["CallToolRequest/properties/params"],
            |rev| vals([
                CallToolRequestParams {
                    meta: req_meta(rev),
                    ..CallToolRequestParams::new("noop")
                },
                CallToolRequestParams {
                    task: (rev == V2025_11_25).then_some(TaskMetadata { ttl: Some(5000) }),
                    input_responses: rev.modern().then(|| {
                        let mut r = InputResponses::new();
                        r.insert("e".into(), InputResponse::Elicit(ElicitResult::decline()));
                        r
                    }),
                    request_state: rev.modern().then(|| "state".into()),
                    meta: req_meta_full(rev),
                    ..CallToolRequestParams::new("get_weather")
                        .with_arguments(obj(json!({"city": "Paris", "n": 1.5})))
                },
            ])
        ),
        t!("CallToolResult", [], |rev| {
            let with = |mut r: CallToolResult| {
                r.result_type = result_type(rev);
                r
            };
            let mut v = vec![
                with(CallToolResult::text("ok")),
                with(CallToolResult::error("bad")),
                with(CallToolResult::new(vec![])),
                with(CallToolResult {
                    meta: any_meta(),
                    is_error: Some(false),
                    ..CallToolResult::new(blocks(rev))
                }),
            ];
            if rev >= V2025_06_18 {
                v.push(with(CallToolResult::structured(json!({"t": 22.5}))));
            }
            if rev.modern() {
                v.push(with(CallToolResult {
                    structured_content: Some(json!([1, 2])),
                    ..CallToolResult::text("[1,2]")
                }));
            }
            vals(v)
        }),
        t!("ContentBlock", [], |rev| vals(blocks(rev))),
        // ---- resources
        t!("Resource", [], |rev| vals([
            resource(false),
            Resource {
                annotations: annotations(rev),
                ..resource(true)
            },
        ])),
        t!("ResourceTemplate", [], |_| vals(templates())),
        t!("ListResourcesResult", [], |rev| vals([
            ListResourcesResult {
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: scope(rev),
                ..Default::default()
            },
            ListResourcesResult {
                resources: vec![resource(false), resource(true)],
                next_cursor: Some("n".into()),
                meta: any_meta(),
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: scope(rev),
            },
        ])),
        t!("ListResourceTemplatesResult", [], |rev| vals([
            ListResourceTemplatesResult {
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: scope(rev),
                ..Default::default()
            },
            ListResourceTemplatesResult {
                resource_templates: templates(),
                next_cursor: Some("n".into()),
                meta: any_meta(),
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: scope(rev),
            },
        ])),
        t!(
            "ReadResourceRequestParams",
            ["ReadResourceRequest/properties/params"],
            |rev| vals([
                ReadResourceRequestParams {
                    uri: "file:///a.txt".into(),
                    meta: req_meta(rev),
                    ..Default::default()
                },
                ReadResourceRequestParams {
                    uri: "file:///a.txt".into(),
                    input_responses: rev.modern().then(InputResponses::new),
                    request_state: rev.modern().then(|| "s".into()),
                    meta: req_meta_full(rev),
                },
            ])
        ),
        t!("ReadResourceResult", [], |rev| vals([
            ReadResourceResult {
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: scope(rev),
                ..Default::default()
            },
            ReadResourceResult {
                contents: vec![
                    text_resource().into(),
                    blob_resource().into(),
                    TextResourceContents::new("file:///b", "b").into(),
                ],
                meta: any_meta(),
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: scope(rev),
            },
        ])),
        t!("TextResourceContents", [], |_| vals([
            text_resource(),
            TextResourceContents::new("file:///x", "")
        ])),
        t!("BlobResourceContents", [], |_| vals([blob_resource()])),
        t!(
            "SubscribeRequestParams",
            ["SubscribeRequest/properties/params"],
            |rev| vals([
                SubscribeRequestParams {
                    uri: "file:///a".into(),
                    meta: None,
                },
                SubscribeRequestParams {
                    uri: "file:///a".into(),
                    meta: req_meta_full(rev),
                },
            ])
        ),
        t!(
            "UnsubscribeRequestParams",
            ["UnsubscribeRequest/properties/params"],
            |rev| vals([UnsubscribeRequestParams {
                uri: "file:///a".into(),
                meta: req_meta_full(rev),
            },])
        ),
        t!("ResourceRequestParams", [], |rev| vals([
            ResourceRequestParams {
                uri: "file:///a".into(),
                meta: req_meta(rev),
            }
        ])),
        t!(
            "ResourceUpdatedNotificationParams",
            ["ResourceUpdatedNotification/properties/params"],
            |rev| vals([
                ResourceUpdatedNotificationParams {
                    uri: "file:///a".into(),
                    meta: None,
                },
                ResourceUpdatedNotificationParams {
                    uri: "file:///a".into(),
                    meta: Some(obj(
                        json!({"io.modelcontextprotocol/subscriptionId": "s-1"})
                    ))
                    .filter(|_| rev.modern()),
                },
            ])
        ),
        // ---- prompts
        t!("Prompt", [], |_| vals(prompts())),
        t!("ListPromptsResult", [], |rev| vals([
            ListPromptsResult {
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: scope(rev),
                ..Default::default()
            },
            ListPromptsResult {
                prompts: prompts(),
                next_cursor: Some("n".into()),
                meta: any_meta(),
                result_type: result_type(rev),
                ttl_ms: ttl(rev),
                cache_scope: scope(rev),
            },
        ])),
        t!(
            "GetPromptRequestParams",
            ["GetPromptRequest/properties/params"],
            |rev| vals([
                GetPromptRequestParams {
                    name: "p".into(),
                    meta: req_meta(rev),
                    ..Default::default()
                },
                GetPromptRequestParams {
                    name: "p".into(),
                    arguments: Some(BTreeMap::from([("code".to_owned(), "x".to_owned())])),
                    input_responses: rev.modern().then(InputResponses::new),
                    request_state: rev.modern().then(|| "s".into()),
                    meta: req_meta_full(rev),
                },
            ])
        ),
        t!("GetPromptResult", [], |rev| vals([
            GetPromptResult {
                result_type: result_type(rev),
                ..GetPromptResult::new(vec![])
            },
            GetPromptResult {
                description: Some("d".into()),
                meta: any_meta(),
                result_type: result_type(rev),
                ..GetPromptResult::new(
                    blocks(rev)
                        .into_iter()
                        .map(|b| PromptMessage::new(Role::User, b))
                        .chain([
                            PromptMessage::user_text("u"),
                            PromptMessage::assistant_text("a")
                        ])
                        .collect(),
                )
            },
        ])),
        t!("PromptMessage", [], |rev| vals(
            blocks(rev)
                .into_iter()
                .map(|b| PromptMessage::new(Role::Assistant, b))
        )),
        // ---- completion
        t!(
            "CompleteRequestParams",
            ["CompleteRequest/properties/params"],
            |rev| vals([
                CompleteRequestParams {
                    reference: CompletionReference::Prompt(PromptReference {
                        name: "p".into(),
                        title: None,
                    }),
                    argument: CompleteArgument {
                        name: "language".into(),
                        value: "py".into(),
                    },
                    context: None,
                    meta: req_meta(rev),
                },
                CompleteRequestParams {
                    reference: CompletionReference::Resource(ResourceTemplateReference {
                        uri: "file:///{path}".into(),
                    }),
                    argument: CompleteArgument {
                        name: "path".into(),
                        value: "sr".into(),
                    },
                    context: (rev >= V2025_06_18).then(|| CompleteContext {
                        arguments: Some(BTreeMap::from([("a".to_owned(), "b".to_owned())])),
                    }),
                    meta: req_meta_full(rev),
                },
                CompleteRequestParams {
                    reference: CompletionReference::Prompt(PromptReference {
                        name: "p".into(),
                        title: Some("P".into()),
                    }),
                    argument: CompleteArgument::default(),
                    context: (rev >= V2025_06_18).then(CompleteContext::default),
                    meta: req_meta(rev),
                },
            ])
        ),
        t!("CompleteResult", [], |rev| vals([
            CompleteResult {
                result_type: result_type(rev),
                ..Default::default()
            },
            CompleteResult {
                completion: Completion {
                    values: vec!["python".into(), "pytorch".into()],
                    total: Some(10),
                    has_more: Some(true),
                },
                meta: any_meta(),
                result_type: result_type(rev),
            },
        ])),
        // ---- logging
        t!(
            "SetLevelRequestParams",
            ["SetLevelRequest/properties/params"],
            |rev| vals([
                SetLevelRequestParams {
                    level: LoggingLevel::Debug,
                    meta: None,
                },
                SetLevelRequestParams {
                    level: LoggingLevel::Emergency,
                    meta: req_meta_full(rev),
                },
            ])
        ),
        t!(
            "LoggingMessageNotificationParams",
            ["LoggingMessageNotification/properties/params"],
            |rev| vals([
                LoggingMessageNotificationParams {
                    level: LoggingLevel::Info,
                    logger: None,
                    data: json!("text"),
                    meta: None,
                },
                LoggingMessageNotificationParams {
                    level: LoggingLevel::Error,
                    logger: Some("db".into()),
                    data: json!({"error": "failed", "port": 5432}),
                    meta: (rev >= V2025_11_25).then(any_meta).flatten(),
                },
            ])
        ),
        // ---- notifications
        t!(
            "ProgressNotificationParams",
            ["ProgressNotification/properties/params"],
            |rev| vals([
                ProgressNotificationParams::new(RequestId::from("p-1"), 50.0),
                ProgressNotificationParams {
                    total: Some(100.0),
                    message: (rev >= V2025_03_26).then(|| "half".into()),
                    meta: (rev >= V2025_11_25).then(any_meta).flatten(),
                    ..ProgressNotificationParams::new(RequestId::from(7), 0.5)
                },
            ])
        ),
        t!(
            "CancelledNotificationParams",
            ["CancelledNotification/properties/params"],
            |rev| {
                let mut v = vec![
                    CancelledNotificationParams {
                        request_id: Some(RequestId::from(3)),
                        ..Default::default()
                    },
                    CancelledNotificationParams {
                        request_id: Some(RequestId::from("r-1")),
                        reason: Some("user".into()),
                        meta: (rev >= V2025_11_25).then(any_meta).flatten(),
                    },
                ];
                if rev == V2025_11_25 {
                    v.push(CancelledNotificationParams::default());
                }
                vals(v)
            }
        ),
        t!(
            "NotificationParams",
            ["ToolListChangedNotification/properties/params"],
            |rev| vals([
                NotificationParams::default(),
                NotificationParams {
                    meta: Some(if rev.modern() {
                        obj(json!({"io.modelcontextprotocol/subscriptionId": "s-1"}))
                    } else {
                        obj(json!({"k": 1}))
                    }),
                },
            ])
        ),
        // ---- sampling
        t!(
            "CreateMessageRequestParams",
            ["CreateMessageRequest/properties/params"],
            |rev| vals(create_message_params(rev))
        ),
        t!("CreateMessageResult", [], |rev| {
            let mut v = create_message_results(rev);
            if rev.modern() {
                for r in &mut v {
                    r.meta = None;
                }
            }
            vals(v)
        }),
        t!("SamplingMessage", [], |rev| vals(
            sampling_contents(rev)
                .into_iter()
                .map(|content| SamplingMessage {
                    role: Role::User,
                    content,
                    meta: None,
                })
        )),
        t!("SamplingMessageContentBlock", [], |rev| vals(
            sampling_blocks(rev)
        )),
        t!("ModelPreferences", [], |_| vals([
            ModelPreferences::default(),
            ModelPreferences {
                hints: Some(vec![ModelHint {
                    name: Some("claude".into())
                }]),
                cost_priority: Some(0.3),
                speed_priority: Some(0.8),
                intelligence_priority: Some(1.0),
            },
        ])),
        // ---- elicitation
        t!(
            "ElicitRequestParams",
            ["ElicitRequest/properties/params"],
            |rev| vals(elicit_params(rev))
        ),
        t!("ElicitRequestFormParams", [], |rev| vals([
            ElicitRequestFormParams::new("m", RequestedSchema::default()),
            ElicitRequestFormParams {
                mode: Some(FormModeTag),
                ..ElicitRequestFormParams::new("m", requested_schema(rev))
            },
        ])),
        t!("ElicitRequestURLParams", [], |rev| vals([
            ElicitRequestURLParams {
                message: "m".into(),
                url: "https://example.com".into(),
                elicitation_id: (rev == V2025_11_25).then(|| "e".into()),
                ..Default::default()
            }
        ])),
        t!("PrimitiveSchemaDefinition", [], |rev| vals(
            requested_schema(rev).properties.into_values()
        )),
        t!("ElicitResult", [], |rev| vals(elicit_results(rev))),
        t!(
            "ElicitationCompleteNotificationParams",
            ["ElicitationCompleteNotification/properties/params"],
            |_| vals([ElicitationCompleteNotificationParams {
                elicitation_id: "e-1".into(),
                meta: None,
            }])
        ),
        t!(
            "URLElicitationRequiredError/properties/error/allOf/1/properties/data",
            [],
            |rev| vals([URLElicitationRequiredErrorData {
                elicitations: vec![ElicitRequestURLParams {
                    message: "m".into(),
                    url: "https://example.com".into(),
                    elicitation_id: (rev == V2025_11_25).then(|| "e".into()),
                    ..Default::default()
                }],
            },])
        ),
        t!(
            "UnsupportedProtocolVersionError/properties/error/allOf/1/properties/data",
            [],
            |_| vals([UnsupportedProtocolVersionErrorData {
                supported: vec!["2026-07-28".into()],
                requested: "1900-01-01".into(),
            },])
        ),
        t!(
            "MissingRequiredClientCapabilityError/properties/error/allOf/1/properties/data",
            [],
            |rev| vals([MissingRequiredClientCapabilityErrorData {
                required_capabilities: client_caps(rev, true),
            },])
        ),
        // ---- roots
        t!("Root", [], |rev| vals([
            Root::new("file:///home"),
            Root {
                name: Some("home".into()),
                meta: (rev >= V2025_06_18).then(any_meta).flatten(),
                ..Root::new("file:///home")
            },
        ])),
        t!("ListRootsResult", [], |rev| vals([
            ListRootsResult::default(),
            ListRootsResult {
                roots: vec![Root::new("file:///a"), Root::new("file:///b")],
                meta: (!rev.modern()).then(any_meta).flatten(),
            },
        ])),
        // ---- tasks (2025-11-25)
        t!("Task", [], |_| vals([
            task(TaskStatus::Working, false),
            task(TaskStatus::InputRequired, true)
        ])),
        t!("TaskMetadata", [], |_| vals([
            TaskMetadata::default(),
            TaskMetadata { ttl: Some(1) }
        ])),
        t!("RelatedTaskMetadata", [], |_| vals([RelatedTaskMetadata {
            task_id: "t".into()
        }])),
        t!("TaskAugmentedRequestParams", [], |rev| vals([
            TaskAugmentedRequestParams::default(),
            TaskAugmentedRequestParams {
                task: Some(TaskMetadata { ttl: Some(1) }),
                meta: req_meta_full(rev),
            },
        ])),
        t!("CreateTaskResult", [], |_| vals([
            CreateTaskResult {
                task: task(TaskStatus::Working, false),
                meta: None,
            },
            CreateTaskResult {
                task: task(TaskStatus::Working, true),
                meta: any_meta(),
            },
        ])),
        t!(
            "GetTaskRequestParams",
            ["GetTaskRequest/properties/params"],
            |_| vals([GetTaskRequestParams {
                task_id: "t-1".into(),
                meta: None,
            }])
        ),
        t!(
            "GetTaskPayloadRequestParams",
            ["GetTaskPayloadRequest/properties/params"],
            |_| vals([GetTaskPayloadRequestParams {
                task_id: "t-1".into(),
                meta: None,
            }])
        ),
        t!(
            "CancelTaskRequestParams",
            ["CancelTaskRequest/properties/params"],
            |_| vals([CancelTaskRequestParams {
                task_id: "t-1".into(),
                meta: None,
            }])
        ),
        t!("GetTaskResult", [], |_| vals([
            GetTaskResult {
                task: task(TaskStatus::Completed, false),
                meta: None,
            },
            GetTaskResult {
                task: task(TaskStatus::Failed, true),
                meta: any_meta(),
            },
        ])),
        t!("CancelTaskResult", [], |_| vals([CancelTaskResult {
            task: task(TaskStatus::Cancelled, true),
            meta: None,
        }])),
        t!("GetTaskPayloadResult", [], |rev| vals([
            GetTaskPayloadResult::default(),
            GetTaskPayloadResult {
                meta: any_meta(),
                payload: obj(case(CallToolResult::new(blocks(rev)))),
            },
        ])),
        t!("ListTasksResult", [], |_| vals([
            ListTasksResult::default(),
            ListTasksResult {
                tasks: vec![
                    task(TaskStatus::Working, false),
                    task(TaskStatus::Completed, true)
                ],
                next_cursor: Some("n".into()),
                meta: any_meta(),
            },
        ])),
        t!("TaskStatusNotificationParams", [], |_| vals([
            TaskStatusNotificationParams {
                task: task(TaskStatus::Working, false),
                meta: None,
            },
            TaskStatusNotificationParams {
                task: task(TaskStatus::Completed, true),
                meta: any_meta(),
            },
        ])),
        t!("ToolExecution", [], |_| vals([
            ToolExecution::default(),
            ToolExecution {
                task_support: Some(TaskSupport::Required),
            },
        ])),
        // ---- subscriptions (2026-07-28)
        t!("SubscriptionsListenRequestParams", [], |rev| vals([
            SubscriptionsListenRequestParams {
                notifications: SubscriptionFilter::default(),
                meta: req_meta(rev),
            },
            SubscriptionsListenRequestParams {
                notifications: SubscriptionFilter {
                    tools_list_changed: Some(true),
                    prompts_list_changed: Some(false),
                    resources_list_changed: Some(true),
                    resource_subscriptions: Some(vec!["file:///a".into()]),
                },
                meta: req_meta_full(rev),
            },
        ])),
        t!("SubscriptionsListenResult", [], |rev| vals([
            SubscriptionsListenResult {
                meta: Some(obj(json!({
                    "io.modelcontextprotocol/subscriptionId": "s-1",
                    "io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"},
                }))),
                result_type: result_type(rev),
            }
        ])),
        t!("SubscriptionsAcknowledgedNotificationParams", [], |_| vals(
            [
                SubscriptionsAcknowledgedNotificationParams::default(),
                SubscriptionsAcknowledgedNotificationParams {
                    notifications: SubscriptionFilter {
                        tools_list_changed: Some(true),
                        ..Default::default()
                    },
                    meta: Some(obj(json!({"io.modelcontextprotocol/subscriptionId": 4}))),
                },
            ]
        )),
        // ---- MRTR (2026-07-28)
        t!("InputRequiredResult", [], |rev| {
            let mut requests = InputRequests::new();
            for (i, p) in elicit_params(rev).into_iter().enumerate() {
                requests.insert(format!("elicit{i}"), InputRequest::Elicit(p));
            }
            for (i, p) in create_message_params(rev).into_iter().enumerate() {
                requests.insert(format!("sample{i}"), InputRequest::CreateMessage(p));
            }
            requests.insert("roots".into(), InputRequest::ListRoots(None));
            requests.insert(
                "roots_meta".into(),
                InputRequest::ListRoots(Some(RequestParams { meta: any_meta() })),
            );
            vals([
                InputRequiredResult::default(),
                InputRequiredResult::new(requests).with_request_state("abc"),
            ])
        }),
        t!("InputResponseRequestParams", [], |rev| {
            let mut responses = InputResponses::new();
            for (i, r) in elicit_results(rev).into_iter().enumerate() {
                responses.insert(format!("elicit{i}"), InputResponse::Elicit(r));
            }
            for (i, mut r) in create_message_results(rev).into_iter().enumerate() {
                r.meta = None;
                responses.insert(format!("sample{i}"), InputResponse::CreateMessage(r));
            }
            responses.insert(
                "roots".into(),
                InputResponse::ListRoots(ListRootsResult::default()),
            );
            vals([
                InputResponseRequestParams {
                    meta: req_meta(rev),
                    ..Default::default()
                },
                InputResponseRequestParams {
                    input_responses: Some(responses),
                    request_state: Some("abc".into()),
                    meta: req_meta_full(rev),
                },
            ])
        }),
        // ---- common
        t!("Annotations", [], |rev| vals([
            Annotations::default(),
            annotations(rev).unwrap_or_default()
        ])),
        t!("Icon", [], |_| vals(icons().unwrap_or_default())),
    ]
}

#[test]
fn instances_validate_against_every_revision() {
    let mut schemas = Schemas::load();
    let mut failures = Vec::new();
    let mut validated = 0usize;
    for (target, cases) in targets() {
        let mut covered = false;
        for rev in REVS {
            let Some(path) = schemas.locate(rev, &target) else {
                continue;
            };
            covered = true;
            let instances = cases(rev);
            assert!(
                !instances.is_empty(),
                "{} has no instances for {}",
                target.def,
                rev.name()
            );
            let validator = schemas.validator(rev, &path);
            for instance in &instances {
                let errors: Vec<String> = validator
                    .iter_errors(instance)
                    .map(|e| format!("{e} at {}", e.instance_path()))
                    .collect();
                if !errors.is_empty() {
                    failures.push(format!(
                        "{} {path}: {instance}\n    {}",
                        rev.name(),
                        errors.join("\n    ")
                    ));
                }
                validated += 1;
            }
        }
        assert!(covered, "{} exists in no revision's schema", target.def);
    }
    assert!(
        failures.is_empty(),
        "{} schema failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(validated > 300, "suspiciously few validations: {validated}");
}

#[test]
fn every_schema_method_has_a_constant() {
    let dir = spec_dir();
    let mut known: Vec<&str> = methods::REQUESTS.to_vec();
    known.extend_from_slice(methods::NOTIFICATIONS);
    for rev in REVS {
        let text =
            std::fs::read_to_string(dir.join(rev.name()).join("schema.json")).expect("read schema");
        let root: Value = serde_json::from_str(&text).expect("schema is JSON");
        let defs = root[rev.defs_key()].as_object().expect("definitions");
        for (name, def) in defs {
            if let Some(method) = def
                .pointer("/properties/method/const")
                .and_then(Value::as_str)
            {
                assert!(
                    known.contains(&method),
                    "{} {name}: no constant for {method:?}",
                    rev.name()
                );
            }
        }
    }
}

#[test]
fn logging_levels_are_ordered_by_severity() {
    let levels: Vec<LoggingLevel> = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]
    .iter()
    .map(|s| serde_json::from_value(json!(s)).expect("level"))
    .collect();
    assert!(levels.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(levels[3].to_string(), "warning");
}

#[test]
fn constructors_produce_the_expected_json() {
    assert_eq!(
        case(CallToolResult::error("boom")),
        json!({"content": [{"type": "text", "text": "boom"}], "isError": true})
    );
    assert_eq!(
        case(ContentBlock::image("AA", "image/png")),
        json!({"type": "image", "data": "AA", "mimeType": "image/png"})
    );
    assert_eq!(
        case(PromptMessage::assistant_text("hi")),
        json!({"role": "assistant", "content": {"type": "text", "text": "hi"}})
    );
    assert_eq!(
        case(Tool::new("t", json!({"type": "object"}))),
        json!({"name": "t", "inputSchema": {"type": "object"}})
    );
    assert_eq!(
        case(TextResourceContents::new("file:///a", "x")),
        json!({"uri": "file:///a", "text": "x"})
    );
    assert_eq!(
        case(Implementation::new("n", "1")),
        json!({"name": "n", "version": "1"})
    );
    // Unknown capability keys survive a round trip.
    let caps = json!({"tools": {"listChanged": true, "future": 1}, "future": {"a": [1]}});
    let decoded: ServerCapabilities = serde_json::from_value(caps.clone()).expect("caps");
    assert_eq!(serde_json::to_value(&decoded).expect("encode"), caps);
    // Unknown fields elsewhere are tolerated.
    let tool: Tool =
        serde_json::from_value(json!({"name": "t", "inputSchema": {}, "future": true}))
            .expect("tool");
    assert_eq!(tool.name, "t");
    // The `ttl` of a task is always present, null when unlimited.
    assert_eq!(case(task(TaskStatus::Working, false))["ttl"], Value::Null);
}

#[test]
fn validation_is_not_vacuous() {
    let mut schemas = Schemas::load();
    let bad = [
        (
            V2026_07_28,
            "CallToolResult",
            case(CallToolResult::text("no resultType")),
        ),
        (
            V2026_07_28,
            "ListToolsResult",
            json!({"tools": [], "resultType": "complete"}),
        ),
        (
            V2026_07_28,
            "CallToolRequestParams",
            case(CallToolRequestParams::new("no _meta")),
        ),
        (
            V2024_11_05,
            "CallToolResult",
            case(CallToolResult::new(vec![ContentBlock::audio(
                "AA",
                "audio/wav",
            )])),
        ),
        (
            V2025_06_18,
            "ElicitResult",
            json!({"action": "accept", "content": {"a": ["x"]}}),
        ),
        (V2024_11_05, "Tool", json!({"name": "t"})),
        (
            V2025_11_25,
            "Task",
            json!({"taskId": "t", "status": "working", "createdAt": "", "lastUpdatedAt": ""}),
        ),
    ];
    for (rev, def, instance) in bad {
        let validator = schemas.validator(rev, def);
        assert!(
            !validator.is_valid(&instance),
            "{} {def} accepted {instance}",
            rev.name()
        );
    }
}
