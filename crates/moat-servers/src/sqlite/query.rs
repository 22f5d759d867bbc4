//! `query_database`: one read-only statement, its rows as JSON and as a text table.

use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use moat::schemars::{self, JsonSchema};
use rusqlite::ErrorCode;
use rusqlite::types::{Value as SqlValue, ValueRef};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

use super::db::Guarded;

/// What `query_database` returns as `structuredContent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QueryResult {
    /// The result's column names, in order.
    pub columns: Vec<String>,
    /// The rows, each an array in column order: integers and reals as numbers, text as
    /// strings, blobs as base64 strings, NULL as null.
    pub rows: Vec<Vec<Value>>,
    /// How many rows `rows` holds.
    pub row_count: usize,
    /// Whether the statement had more rows than were returned (the row limit or the
    /// output size cap was reached).
    pub truncated: bool,
    /// How long the statement ran, in milliseconds.
    pub elapsed_ms: u64,
}

/// Why a result stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cut {
    Rows,
    Bytes,
}

/// A statement's limits.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) rows: usize,
    pub(super) bytes: usize,
}

/// The hint every refused write carries.
pub(super) const READ_ONLY_HINT: &str = "The database is opened read-only: query_database runs \
     one statement that reads (SELECT, WITH … SELECT, or a read-only PRAGMA such as \
     table_info); it cannot insert, update, delete, change the schema or settings, attach \
     files or start transactions.";

/// Run `sql` with `params` on `g`, keeping at most `limits`.
pub(super) fn run(
    g: &Guarded,
    sql: &str,
    params: &[Value],
    limits: Limits,
) -> Result<(QueryResult, Option<Cut>), String> {
    if sql.trim().is_empty() {
        return Err("`sql` is empty: pass one SELECT statement.".to_owned());
    }
    let bound = params
        .iter()
        .enumerate()
        .map(|(i, v)| to_sql(i, v))
        .collect::<Result<Vec<_>, _>>()?;
    let started = Instant::now();
    let mut stmt = g.conn.prepare(sql).map_err(|e| explain(g, e))?;
    // SQLite's own verdict on the compiled program, the last word: `VACUUM INTO` passes
    // the authorizer at prepare time (it is asked only once the copy starts), and would
    // write a new file even through a read-only connection.
    if !stmt.readonly() {
        return Err(format!(
            "Not authorized: SQLite reports that this statement writes. {READ_ONLY_HINT}"
        ));
    }
    let expected = stmt.parameter_count();
    if expected != bound.len() {
        return Err(format!(
            "The statement has {expected} parameter(s) (?, ?N, :name) and `params` has {}: \
             pass one value per parameter, in order.",
            bound.len()
        ));
    }
    for (i, value) in bound.iter().enumerate() {
        stmt.raw_bind_parameter(i + 1, value)
            .map_err(|e| explain(g, e))?;
    }
    let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let width = columns.len();
    let mut rows = Vec::new();
    let mut bytes = 0usize;
    let mut cut = None;
    let mut cursor = stmt.raw_query();
    while let Some(row) = cursor.next().map_err(|e| explain(g, e))? {
        if rows.len() == limits.rows {
            cut = Some(Cut::Rows);
            break;
        }
        let mut out = Vec::with_capacity(width);
        for i in 0..width {
            let value = row.get_ref(i).map_err(|e| explain(g, e))?;
            let (json, size) = to_json(value);
            bytes += size;
            out.push(json);
        }
        if bytes > limits.bytes && !rows.is_empty() {
            cut = Some(Cut::Bytes);
            break;
        }
        rows.push(out);
        if bytes > limits.bytes {
            // A single row larger than the cap is still returned: it is the answer.
            cut = Some(Cut::Bytes);
            break;
        }
    }
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok((
        QueryResult {
            columns,
            row_count: rows.len(),
            rows,
            truncated: cut.is_some(),
            elapsed_ms,
        },
        cut,
    ))
}

/// A parameter from JSON: scalars only.
fn to_sql(index: usize, value: &Value) -> Result<SqlValue, String> {
    Ok(match value {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => SqlValue::Integer(i),
            (None, Some(f)) => SqlValue::Real(f),
            (None, None) => {
                return Err(format!(
                    "params[{index}] = {n} does not fit SQLite's 64-bit numbers."
                ));
            }
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        Value::Array(_) | Value::Object(_) => {
            return Err(format!(
                "params[{index}] is an {}: parameters must be strings, numbers, booleans or \
                 null.",
                if value.is_array() { "array" } else { "object" }
            ));
        }
    })
}

/// A column value as JSON, and roughly how many bytes it adds to the output.
fn to_json(value: ValueRef<'_>) -> (Value, usize) {
    match value {
        ValueRef::Null => (Value::Null, 4),
        ValueRef::Integer(i) => (Value::from(i), 20),
        // SQLite never stores NaN, but it does store infinities, which JSON cannot spell.
        ValueRef::Real(f) => (
            Number::from_f64(f).map_or_else(|| Value::String(f.to_string()), Value::Number),
            24,
        ),
        ValueRef::Text(t) => (
            Value::String(String::from_utf8_lossy(t).into_owned()),
            t.len(),
        ),
        ValueRef::Blob(b) => {
            let encoded = STANDARD.encode(b);
            let len = encoded.len();
            (Value::String(encoded), len)
        }
    }
}

/// A SQLite error in words the model can act on.
pub(super) fn explain(g: &Guarded, e: rusqlite::Error) -> String {
    let denied = g.take_denied();
    let code = e.sqlite_error_code();
    match (&e, code) {
        (_, Some(ErrorCode::AuthorizationForStatementDenied)) => match denied {
            Some(what) => format!("Not authorized: {what}. {READ_ONLY_HINT}"),
            None => format!("Not authorized ({e}). {READ_ONLY_HINT}"),
        },
        (_, Some(ErrorCode::ReadOnly)) => format!("{e}. {READ_ONLY_HINT}"),
        (_, Some(ErrorCode::OperationInterrupted)) if g.stop.was_cancelled() => {
            "The statement was stopped: the request was cancelled.".to_owned()
        }
        (_, Some(ErrorCode::OperationInterrupted)) => "The statement was stopped by the \
             statement timeout. Narrow the query (a WHERE clause, a LIMIT, fewer joins) or \
             make sure a recursive CTE ends."
            .to_owned(),
        (rusqlite::Error::MultipleStatement, _) => "Only one statement per call: send each \
             statement in a call of its own."
            .to_owned(),
        _ => format!("SQLite error: {e}"),
    }
}

/// `columns` and `rows` as an aligned text table, with a line saying how it ended.
pub(super) fn render(
    result: &QueryResult,
    cut: Option<Cut>,
    limits: Limits,
    max_rows: usize,
) -> String {
    let mut out = String::new();
    if result.columns.is_empty() {
        out.push_str("(the statement returned no columns)\n");
        return out;
    }
    let cells: Vec<Vec<String>> = result
        .rows
        .iter()
        .map(|row| row.iter().map(cell).collect())
        .collect();
    let mut widths: Vec<usize> = result.columns.iter().map(|c| c.chars().count()).collect();
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |out: &mut String, values: &mut dyn Iterator<Item = &str>| {
        let mut first = true;
        for (value, width) in values.zip(&widths) {
            if !first {
                out.push_str(" | ");
            }
            first = false;
            out.push_str(value);
            for _ in value.chars().count()..*width {
                out.push(' ');
            }
        }
        let trimmed = out.trim_end_matches(' ').len();
        out.truncate(trimmed);
        out.push('\n');
    };
    line(&mut out, &mut result.columns.iter().map(String::as_str));
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&rule.join("-+-"));
    out.push('\n');
    for row in &cells {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    let n = result.row_count;
    let plural = if n == 1 { "" } else { "s" };
    let ms = result.elapsed_ms;
    match cut {
        None => out.push_str(&format!("({n} row{plural}, {ms} ms)\n")),
        Some(Cut::Rows) if limits.rows < max_rows => out.push_str(&format!(
            "(first {n} row{plural}, {ms} ms; truncated: more rows exist — pass a larger \
             `limit` (at most {max_rows}) or narrow the query)\n"
        )),
        Some(Cut::Rows) => out.push_str(&format!(
            "(first {n} row{plural}, {ms} ms; truncated at the {max_rows}-row maximum: \
             narrow the query or aggregate)\n"
        )),
        Some(Cut::Bytes) => out.push_str(&format!(
            "(first {n} row{plural}, {ms} ms; truncated: the result reached the {}-byte \
             output cap — select fewer or smaller columns)\n",
            limits.bytes
        )),
    }
    out
}

/// One value as table text, kept on one line.
fn cell(value: &Value) -> String {
    let text = match value {
        Value::Null => return "NULL".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.contains(['\n', '\r', '\t']) {
        text.replace('\n', "\\n")
            .replace('\r', "\\r")
            .replace('\t', "\\t")
    } else {
        text
    }
}
