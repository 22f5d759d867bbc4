//! What the database holds: its tables, one table's description, the whole schema.
//!
//! Everything here is read through the same guarded connections as `query_database`,
//! with the table name always bound as a parameter (the `pragma_*` table-valued
//! functions), never spliced into SQL, except for the row count, where the name comes
//! from `sqlite_schema` itself and is quoted.

use std::fmt::Write as _;

use moat::schemars::{self, JsonSchema};
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

/// What `describe_table` returns as `structuredContent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TableDescription {
    /// The table's name, as the schema spells it.
    pub table: String,
    /// `table` or `view`.
    pub kind: String,
    /// The `CREATE` statement, as stored in the schema.
    pub sql: Option<String>,
    /// The columns, in order.
    pub columns: Vec<ColumnDescription>,
    /// The indexes on the table.
    pub indexes: Vec<IndexDescription>,
    /// The table's foreign keys.
    pub foreign_keys: Vec<ForeignKeyDescription>,
    /// How many rows the table has (null when counting did not finish in time).
    pub row_count: Option<i64>,
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ColumnDescription {
    /// The column's name.
    pub name: String,
    /// The declared type (may be empty: SQLite columns need not have one).
    #[serde(rename = "type")]
    pub declared_type: String,
    /// Whether the column is `NOT NULL`.
    pub notnull: bool,
    /// The default value's SQL text, if any.
    pub default: Option<String>,
    /// The column's position in the primary key (1-based), or 0 if not part of it.
    pub pk: i64,
}

/// One index of a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IndexDescription {
    /// The index's name.
    pub name: String,
    /// Whether the index enforces uniqueness.
    pub unique: bool,
    /// How it was made: `c` (CREATE INDEX), `u` (UNIQUE constraint) or `pk` (PRIMARY KEY).
    pub origin: String,
    /// Whether it is a partial index (with a WHERE clause).
    pub partial: bool,
    /// The indexed columns, in order (`<expression>` for an indexed expression).
    pub columns: Vec<String>,
}

/// One foreign key of a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ForeignKeyDescription {
    /// The referencing columns of this table.
    pub columns: Vec<String>,
    /// The referenced table.
    pub references: String,
    /// The referenced columns (null: the referenced table's primary key).
    pub to: Vec<Option<String>>,
    /// The `ON UPDATE` action.
    pub on_update: String,
    /// The `ON DELETE` action.
    pub on_delete: String,
}

/// The user's tables and views, by name (SQLite's own `sqlite_*` tables left out).
pub(super) fn tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') \
         AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    )?;
    let names = stmt.query_map([], |row| row.get(0))?;
    names.collect()
}

/// Describe the table or view `name` (matched as SQLite does, without regard to case);
/// `None` if there is none. The row count only when `count` is set.
pub(super) fn describe(
    conn: &Connection,
    name: &str,
    count: bool,
) -> rusqlite::Result<Option<TableDescription>> {
    let found = conn
        .query_row(
            "SELECT name, type, sql FROM sqlite_schema WHERE type IN ('table', 'view') \
             AND name = ?1 COLLATE NOCASE",
            [name],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, Option<String>>(2)?,
                ))
            },
        )
        .optional()?;
    let Some((table, kind, sql)) = found else {
        return Ok(None);
    };

    let mut stmt = conn.prepare(
        "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?1) ORDER BY cid",
    )?;
    let columns = stmt
        .query_map([&table], |row| {
            Ok(ColumnDescription {
                name: row.get(0)?,
                declared_type: row.get(1)?,
                notnull: row.get(2)?,
                default: row.get(3)?,
                pk: row.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;

    let mut stmt = conn.prepare(
        "SELECT name, \"unique\", origin, partial FROM pragma_index_list(?1) ORDER BY name",
    )?;
    let mut indexes = stmt
        .query_map([&table], |row| {
            Ok(IndexDescription {
                name: row.get(0)?,
                unique: row.get(1)?,
                origin: row.get(2)?,
                partial: row.get(3)?,
                columns: Vec::new(),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut stmt = conn.prepare("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")?;
    for index in &mut indexes {
        index.columns = stmt
            .query_map([&index.name], |row| {
                Ok(row
                    .get::<_, Option<String>>(0)?
                    .unwrap_or_else(|| "<expression>".to_owned()))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
    }

    let mut stmt = conn.prepare(
        "SELECT id, \"table\", \"from\", \"to\", on_update, on_delete \
         FROM pragma_foreign_key_list(?1) ORDER BY id, seq",
    )?;
    let mut rows = stmt.query(params![&table])?;
    let mut foreign_keys: Vec<(i64, ForeignKeyDescription)> = Vec::new();
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let from: String = row.get(2)?;
        let to: Option<String> = row.get(3)?;
        match foreign_keys.last_mut() {
            Some((last, fk)) if *last == id => {
                fk.columns.push(from);
                fk.to.push(to);
            }
            _ => foreign_keys.push((
                id,
                ForeignKeyDescription {
                    columns: vec![from],
                    references: row.get(1)?,
                    to: vec![to],
                    on_update: row.get(4)?,
                    on_delete: row.get(5)?,
                },
            )),
        }
    }

    // Counting a large table can take a while; it runs under the same deadline, and a
    // count that does not finish leaves the rest of the description intact.
    let row_count = if count {
        let sql = format!("SELECT count(*) FROM {}", quote(&table));
        match conn.query_row(&sql, [], |row| row.get(0)) {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::debug!(table = %table, error = %e, "row count not available");
                None
            }
        }
    } else {
        None
    };

    Ok(Some(TableDescription {
        table,
        kind,
        sql,
        columns,
        indexes,
        foreign_keys: foreign_keys.into_iter().map(|(_, fk)| fk).collect(),
        row_count,
    }))
}

/// Every `CREATE` statement of the schema: tables, views, indexes, triggers.
pub(super) fn schema(conn: &Connection) -> rusqlite::Result<String> {
    let mut stmt = conn.prepare(
        "SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY \
         CASE type WHEN 'table' THEN 0 WHEN 'view' THEN 1 WHEN 'index' THEN 2 ELSE 3 END, name",
    )?;
    let statements = stmt
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    if statements.is_empty() {
        return Ok("-- the database has no tables\n".to_owned());
    }
    let mut out = String::new();
    for sql in statements {
        out.push_str(&sql);
        out.push_str(";\n\n");
    }
    Ok(out)
}

/// `name` as an SQL identifier.
fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A description as text: the `CREATE` statement, then columns, indexes, foreign keys.
pub(super) fn render(d: &TableDescription) -> String {
    let mut out = String::new();
    let _ = write!(out, "{} {}", d.kind, d.table);
    if let Some(n) = d.row_count {
        let _ = write!(out, " ({n} row{})", if n == 1 { "" } else { "s" });
    }
    out.push_str("\n\n");
    if let Some(sql) = &d.sql {
        let _ = writeln!(out, "{sql};\n");
    }
    out.push_str("columns:\n");
    for c in &d.columns {
        let _ = write!(out, "  {}", c.name);
        if !c.declared_type.is_empty() {
            let _ = write!(out, " {}", c.declared_type);
        }
        if c.pk > 0 {
            out.push_str(" PRIMARY KEY");
        }
        if c.notnull {
            out.push_str(" NOT NULL");
        }
        if let Some(default) = &c.default {
            let _ = write!(out, " DEFAULT {default}");
        }
        out.push('\n');
    }
    if !d.indexes.is_empty() {
        out.push_str("indexes:\n");
        for i in &d.indexes {
            let unique = if i.unique { "UNIQUE " } else { "" };
            let partial = if i.partial { " (partial)" } else { "" };
            let _ = writeln!(
                out,
                "  {unique}{} ({}){partial}",
                i.name,
                i.columns.join(", ")
            );
        }
    }
    if !d.foreign_keys.is_empty() {
        out.push_str("foreign keys:\n");
        for fk in &d.foreign_keys {
            let to: Vec<&str> = fk
                .to
                .iter()
                .map(|c| c.as_deref().unwrap_or("<primary key>"))
                .collect();
            let _ = writeln!(
                out,
                "  ({}) REFERENCES {} ({}) ON UPDATE {} ON DELETE {}",
                fk.columns.join(", "),
                fk.references,
                to.join(", "),
                fk.on_update,
                fk.on_delete
            );
        }
    }
    out
}
