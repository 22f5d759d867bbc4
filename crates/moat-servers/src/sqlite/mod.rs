//! The SQLite server (`moat serve sqlite --db FILE`): read-only SQL over one database.
//!
//! - `query_database` runs one statement that reads, with `?` parameters, a row limit, a
//!   statement timeout and an output size cap, and answers with a text table and the same
//!   rows as `structuredContent` ([`QueryResult`], declared as the tool's `outputSchema`).
//! - `describe_table` gives a table's columns, indexes, foreign keys and row count
//!   ([`TableDescription`]).
//! - Resources: [`SCHEMA_URI`] (every `CREATE` statement) and one `sqlite://table/<name>`
//!   per table or view present at startup; the template [`TABLE_TEMPLATE`] reads any
//!   table, and completes its `name` over the tables there are now.
//!
//! Read-only is enforced by SQLite, not by reading the SQL text: the file is opened
//! read-only with `PRAGMA query_only`, an authorizer refuses every action but reading, and
//! a statement runs only if SQLite says it does not write (see `db.rs`). Statements run on
//! blocking threads from a small pool of connections, under a deadline that interrupts
//! them, and stop early when the request is cancelled.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use moat_servers::sqlite::{SqliteOptions, server};
//! server("shop.db".into(), SqliteOptions::default())?.serve_stdio().await?;
//! # Ok(()) }
//! ```

mod db;
mod describe;
mod query;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use moat::server::TemplateError;
use moat::types::{
    CallToolResult, CompleteRequestParams, CompletionReference, Resource, ResourceTemplate, Tool,
    ToolAnnotations,
};
use moat::{RequestContext, ResourceRequest, Server};
use serde::Deserialize;
use serde_json::{Value, json};

pub use describe::{ColumnDescription, ForeignKeyDescription, IndexDescription, TableDescription};
pub use query::QueryResult;

use db::Pool;
use query::Limits;

/// The resource holding the whole schema.
pub const SCHEMA_URI: &str = "sqlite://schema";
/// The resource template for one table's schema; its `name` completes over table names.
pub const TABLE_TEMPLATE: &str = "sqlite://table/{name}";

/// The URI of table `name`'s schema resource (the name percent-encoded).
pub fn table_uri(name: &str) -> String {
    let mut uri = String::from("sqlite://table/");
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// Limits of the SQLite server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// The most rows a call may ask for (`limit` is capped here).
    pub max_rows: usize,
    /// Rows returned when a call names no `limit`.
    pub default_rows: usize,
    /// How long one statement may run before it is interrupted.
    pub statement_timeout: Duration,
    /// Roughly the most bytes of values one result carries; rows past it are cut off
    /// (the first row is always returned).
    pub max_output_bytes: usize,
    /// Connections kept open: how many statements may run at once.
    pub connections: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            max_rows: 5000,
            default_rows: 500,
            statement_timeout: Duration::from_secs(5),
            max_output_bytes: 1024 * 1024,
            connections: 4,
        }
    }
}

impl SqliteOptions {
    fn check(&self) -> Result<(), SqliteError> {
        let problem = if self.max_rows == 0 {
            "max_rows must be at least 1"
        } else if self.default_rows == 0 || self.default_rows > self.max_rows {
            "default_rows must be between 1 and max_rows"
        } else if self.statement_timeout.is_zero() {
            "statement_timeout must be more than zero"
        } else if self.max_output_bytes == 0 {
            "max_output_bytes must be at least 1"
        } else if self.connections == 0 {
            "connections must be at least 1"
        } else {
            return Ok(());
        };
        Err(SqliteError::Options(problem.to_owned()))
    }
}

/// Why the SQLite server could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteError {
    /// There is no file at the path given.
    #[error("no database file at {}", path.display())]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// The file could not be opened, or is not a SQLite database.
    #[error("cannot open {} as a read-only SQLite database: {source}", path.display())]
    Open {
        /// The path given.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The options contradict each other.
    #[error("invalid SQLite server options: {0}")]
    Options(String),
    /// A resource template did not parse (a bug in this module).
    #[error(transparent)]
    Template(#[from] TemplateError),
}

/// Build the SQLite server over the database at `db`, which must exist; it is opened
/// read-only (the directory need not be writable unless the database is in WAL mode and
/// has no `-shm` file yet). Opens one connection now, to fail early on a bad file, and
/// lists the tables for the resource list.
pub fn server(db: PathBuf, options: SqliteOptions) -> Result<Server, SqliteError> {
    options.check()?;
    if !db.exists() {
        return Err(SqliteError::NotFound { path: db });
    }
    let open_error = |source| SqliteError::Open {
        path: db.clone(),
        source,
    };
    let first = db::open(&db, options.statement_timeout).map_err(open_error)?;
    let tables = describe::tables(&first.conn).map_err(open_error)?;
    let file_name = db.file_name().map_or_else(
        || db.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let pool = Arc::new(Pool::new(
        db,
        first,
        options.connections,
        options.statement_timeout,
    ));
    let options = Arc::new(options);

    let server = Server::new("moat-sqlite", env!("CARGO_PKG_VERSION")).instructions(format!(
        "Read-only access to the SQLite database {file_name}. Read the {SCHEMA_URI} resource \
         or call describe_table to learn the tables, then query_database with one SELECT per \
         call, passing values through ? placeholders and `params`. Anything that writes is \
         refused."
    ));
    let server = query_tool(server, pool.clone(), options.clone());
    let server = describe_tool(server, pool.clone());
    let server = resources(server, &pool, &tables)?;
    Ok(completions(server, pool))
}

/// Annotations of a tool that only reads the database.
fn read_only(title: &str) -> ToolAnnotations {
    ToolAnnotations {
        title: Some(title.to_owned()),
        read_only_hint: Some(true),
        destructive_hint: Some(false),
        idempotent_hint: Some(true),
        open_world_hint: Some(false),
    }
}

/// A successful result: `text` for the eye, `value` as `structuredContent`.
fn structured(text: String, value: &impl serde::Serialize) -> Result<CallToolResult, String> {
    let value = serde_json::to_value(value).map_err(|e| format!("could not encode: {e}"))?;
    let mut result = CallToolResult::text(text);
    result.structured_content = Some(value);
    Ok(result)
}

/// Arguments of `query_database`.
#[derive(Debug, Deserialize, moat::schemars::JsonSchema)]
struct QueryArgs {
    /// One SQL statement that reads: SELECT, WITH … SELECT, or a read-only PRAGMA such as
    /// table_info. Put values in ? placeholders and pass them in `params`.
    sql: String,
    /// Values for the statement's placeholders, in order: strings, numbers, booleans
    /// (stored as 1 and 0) or null.
    #[serde(default)]
    params: Vec<Value>,
    /// The most rows to return.
    limit: Option<usize>,
}

fn query_tool(server: Server, pool: Arc<Pool>, options: Arc<SqliteOptions>) -> Server {
    let mut input = moat::schema::input_schema::<QueryArgs>();
    // What the derive cannot know: the limits are settings, and parameters are scalars.
    if let Some(props) = input.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "limit".to_owned(),
            json!({
                "type": "integer",
                "minimum": 1,
                "maximum": options.max_rows,
                "description": format!(
                    "The most rows to return (default {}, at most {}).",
                    options.default_rows, options.max_rows
                ),
            }),
        );
        if let Some(params) = props.get_mut("params").and_then(Value::as_object_mut) {
            // A scalar, in the portable form (one type per branch, no `null` type: see
            // `moat::schema::portable`); a null still binds SQL NULL.
            params.insert(
                "items".to_owned(),
                json!({
                    "anyOf": [{ "type": "string" }, { "type": "number" }, { "type": "boolean" }],
                    "description": "A string, number or boolean; null binds SQL NULL.",
                }),
            );
        }
    }
    let def = Tool::new("query_database", input)
        .with_title("Query the database (read-only)")
        .with_description(format!(
            "Run one read-only SQL statement (SELECT, WITH … SELECT, or a read-only PRAGMA) \
             on the SQLite database and return its rows, as a text table and as \
             structured JSON. Values go in ? placeholders with `params`. Returns at most \
             `limit` rows ({} by default, {} at most) and says when it truncated; a \
             statement is stopped after {} ms. Anything that writes is refused by the \
             database.",
            options.default_rows,
            options.max_rows,
            options.statement_timeout.as_millis()
        ))
        .with_output_schema(moat::schema::output_schema::<QueryResult>())
        .with_annotations(read_only("Query the database (read-only)"));
    server.tool_def(def, move |ctx: RequestContext, args: QueryArgs| {
        let pool = pool.clone();
        let options = options.clone();
        async move {
            let rows = match args.limit {
                None => options.default_rows,
                Some(0) => return Err("`limit` must be at least 1.".to_owned()),
                Some(n) => n.min(options.max_rows),
            };
            let limits = Limits {
                rows,
                bytes: options.max_output_bytes,
            };
            let QueryArgs { sql, params, .. } = args;
            let logged = sql.clone();
            let outcome = pool
                .run(Some(&ctx), move |g| query::run(g, &sql, &params, limits))
                .await
                .map_err(|e| e.to_string())?;
            match outcome {
                Ok((result, cut)) => {
                    tracing::debug!(
                        sql = %logged,
                        rows = result.row_count,
                        truncated = result.truncated,
                        elapsed_ms = result.elapsed_ms,
                        "query_database"
                    );
                    let text = query::render(&result, cut, limits, options.max_rows);
                    structured(text, &result)
                }
                Err(message) => {
                    tracing::info!(sql = %logged, error = %message, "query_database refused");
                    Err(message)
                }
            }
        }
    })
}

/// Arguments of `describe_table`.
#[derive(Debug, Deserialize, moat::schemars::JsonSchema)]
struct DescribeArgs {
    /// The table or view to describe (see the sqlite://schema resource for the list).
    table: String,
}

fn describe_tool(server: Server, pool: Arc<Pool>) -> Server {
    let def = Tool::new("describe_table", Value::Null)
        .with_title("Describe a table")
        .with_description(
            "Describe a table or view of the SQLite database: its CREATE statement, columns \
             (name, type, NOT NULL, default, primary key), indexes, foreign keys and row \
             count.",
        )
        .with_output_schema(moat::schema::output_schema::<TableDescription>())
        .with_annotations(read_only("Describe a table"));
    server.tool_def(def, move |ctx: RequestContext, args: DescribeArgs| {
        let pool = pool.clone();
        async move {
            let table = args.table;
            let found: Result<_, String> = pool
                .run(Some(&ctx), move |g| {
                    let described = describe::describe(&g.conn, &table, true)
                        .map_err(|e| query::explain(g, e))?;
                    match described {
                        Some(d) => Ok(Ok(d)),
                        None => {
                            let tables =
                                describe::tables(&g.conn).map_err(|e| query::explain(g, e))?;
                            Ok(Err((table, tables)))
                        }
                    }
                })
                .await
                .map_err(|e| e.to_string())?;
            match found? {
                Ok(d) => structured(describe::render(&d), &d),
                Err((table, tables)) => Err(no_such_table(&table, &tables)),
            }
        }
    })
}

/// The error for a table that is not there, naming the ones that are.
fn no_such_table(table: &str, tables: &[String]) -> String {
    const SHOWN: usize = 50;
    if tables.is_empty() {
        return format!("No table or view named {table:?}: the database has no tables.");
    }
    let mut list = tables
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if tables.len() > SHOWN {
        list.push_str(&format!(", … ({} in all)", tables.len()));
    }
    format!("No table or view named {table:?}. The tables are: {list}.")
}

/// Read the description of `name` as text, for the table resources.
async fn table_text(
    pool: &Arc<Pool>,
    ctx: &RequestContext,
    name: String,
) -> Result<String, moat::ResourceError> {
    let described = pool
        .run(Some(ctx), move |g| {
            describe::describe(&g.conn, &name, false)
                .map_err(|e| query::explain(g, e))
                .map(|d| d.ok_or(name))
        })
        .await
        .map_err(|e| moat::ResourceError::Failed(e.to_string()))?
        .map_err(moat::ResourceError::Failed)?;
    match described {
        Ok(d) => Ok(describe::render(&d)),
        Err(name) => Err(moat::ResourceError::NotFound(format!(
            "no table or view named {name:?}"
        ))),
    }
}

fn resources(server: Server, pool: &Arc<Pool>, tables: &[String]) -> Result<Server, SqliteError> {
    let mut schema = Resource::new(SCHEMA_URI, "schema");
    schema.title = Some("Database schema".to_owned());
    schema.description = Some(
        "Every CREATE statement of the database: tables, views, indexes, triggers.".to_owned(),
    );
    schema.mime_type = Some("text/plain".to_owned());
    let p = pool.clone();
    let mut server = server.resource_def(schema, move |req: ResourceRequest| {
        let pool = p.clone();
        async move {
            pool.run(Some(&req.ctx), |g| {
                describe::schema(&g.conn).map_err(|e| query::explain(g, e))
            })
            .await
            .map_err(|e| e.to_string())?
        }
    });

    for table in tables {
        let mut def = Resource::new(table_uri(table), table.clone());
        def.title = Some(format!("Schema of {table}"));
        def.description = Some(format!(
            "The schema of {table}: its CREATE statement, columns, indexes and foreign keys."
        ));
        def.mime_type = Some("text/plain".to_owned());
        let (pool, name) = (pool.clone(), table.clone());
        server = server.resource_def(def, move |req: ResourceRequest| {
            let (pool, name) = (pool.clone(), name.clone());
            async move { table_text(&pool, &req.ctx, name).await }
        });
    }

    let mut template = ResourceTemplate::new(TABLE_TEMPLATE, "table");
    template.title = Some("Schema of a table".to_owned());
    template.description = Some(
        "The schema of one table or view: its CREATE statement, columns, indexes and foreign \
         keys. `name` completes over the tables."
            .to_owned(),
    );
    template.mime_type = Some("text/plain".to_owned());
    let pool = pool.clone();
    let server = server.try_resource_template(template, move |req: ResourceRequest| {
        let pool = pool.clone();
        async move {
            let name = req.var("name").unwrap_or_default().to_owned();
            table_text(&pool, &req.ctx, name).await
        }
    })?;
    Ok(server)
}

/// Complete the template's `name` over the tables, by prefix, without regard to case.
fn completions(server: Server, pool: Arc<Pool>) -> Server {
    server.completion(move |params: CompleteRequestParams| {
        let pool = pool.clone();
        async move {
            let CompletionReference::Resource(reference) = &params.reference else {
                return Ok(Vec::new());
            };
            if reference.uri != TABLE_TEMPLATE || params.argument.name != "name" {
                return Ok(Vec::new());
            }
            let prefix = params.argument.value.to_lowercase();
            let tables = pool
                .run(None, |g| {
                    describe::tables(&g.conn).map_err(|e| query::explain(g, e))
                })
                .await
                .map_err(|e| e.to_string())??;
            Ok::<_, String>(
                tables
                    .into_iter()
                    .filter(|t| t.to_lowercase().starts_with(&prefix))
                    .collect(),
            )
        }
    })
}
