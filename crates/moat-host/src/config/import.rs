//! Reading the MCP configurations clients already have, as they are.
//!
//! Two shapes cover the clients people use:
//!
//! - `{"mcpServers": {NAME: {...}}}`: Claude Desktop (`claude_desktop_config.json`), Claude
//!   Code (`.mcp.json`), Cursor (`.cursor/mcp.json`). A server has `command`, `args`, `env`
//!   (and Cursor's `envFile`), or `url` and `headers`; `type` is optional (`stdio`, `http`,
//!   `sse`; without it, `command` means stdio and `url` means "try Streamable HTTP, then SSE").
//! - `{"servers": {NAME: {...}}, "inputs": [...]}`: VS Code (`.vscode/mcp.json`), with `type`,
//!   `command`, `args`, `env`, `envFile`, `cwd`, `url`, `headers`.
//!
//! Variables, in every string: `${VAR}`, `${VAR:-default}`, `${env:VAR}` (the environment),
//! `${workspaceFolder}` (the directory holding `.vscode`/`.cursor`, else the file's own),
//! `${workspaceFolderBasename}`, `${userHome}` (`$HOME`), `${pathSeparator}` and `${/}`.
//! `${input:ID}` is an error: VS Code prompts the user for it, and a gateway loading its
//! configuration cannot; the message says to put the value in moat.toml or an environment
//! variable. An `envFile` is read at load time (`KEY=VALUE` lines, `#` comments, optional
//! `export ` and quotes); `env` wins over it.
//!
//! These files are written for other programs, so moat reads them the way those programs do:
//! comments and trailing commas (VS Code's JSONC) are accepted, and keys moat has no use for
//! (`autoApprove`, `description`, `gallery`…) are ignored. `disabled: true` (Cline, Roo)
//! marks the server disabled. Every imported server gets the default sandbox profile,
//! confined to the workspace directory, widened by what its command line names (the
//! program's installation, the files it runs, the folders it works on: see `reach.rs`).
//! Every imported server records the file it came from (`imported_from`): a change of its
//! launch by an edit of that file is held until approved (`launch_pins.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::{ConfigError, Diagnostic};
use super::expand::ExpandError;
use super::server::{SandboxSetting, ServerConfig, ServerTransport, UrlTransport};
use super::source::{Lookup, Ordered, Parts, Source, base_dir, build_server};

#[derive(Deserialize)]
struct JsonFile {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Ordered<JsonServer>>,
    servers: Option<Ordered<JsonServer>>,
    #[serde(default)]
    inputs: Vec<JsonInput>,
}

#[derive(Deserialize)]
struct JsonInput {
    id: Option<String>,
    description: Option<String>,
}

#[derive(Deserialize)]
struct JsonServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, serde_json::Value>,
    #[serde(rename = "envFile")]
    env_file: Option<String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    disabled: bool,
}

/// The servers of an `mcpServers` or `servers` JSON file, in file order.
pub(crate) fn servers_from_json(
    text: &str,
    path: Option<&Path>,
    lookup: Lookup<'_>,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let clean = strip_jsonc(text);
    let located = |line: usize, column: usize, field: String, message: String, hint| {
        ConfigError::Invalid(Box::new(Diagnostic {
            file: path.map(Path::to_path_buf),
            line: (line > 0).then_some(line),
            column: (column > 0).then_some(column),
            field,
            message,
            hint,
        }))
    };
    let mut de = serde_json::Deserializer::from_str(&clean);
    let file: JsonFile = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        let inner = e.inner();
        let message = strip_position(&inner.to_string());
        located(inner.line(), inner.column(), field, message, None)
    })?;
    de.end().map_err(|e| {
        let message = strip_position(&e.to_string());
        located(e.line(), e.column(), String::new(), message, None)
    })?;
    let (root, servers) = match (file.mcp_servers, file.servers) {
        (Some(s), None) => ("mcpServers", s),
        (None, Some(s)) => ("servers", s),
        (Some(_), Some(_)) => {
            return Err(located(
                0,
                0,
                String::new(),
                "the file has both `mcpServers` and `servers`".into(),
                Some("keep one of them".into()),
            ));
        }
        (None, None) => {
            return Err(located(
                1,
                1,
                String::new(),
                "no `mcpServers` or `servers` object: this is not an MCP client configuration"
                    .into(),
                Some(NOT_MCP_HINT.into()),
            ));
        }
    };
    let workspace = workspace_dir(path);
    let vars = |name: &str| resolve(name, &workspace, lookup);
    let explain = |e: &ExpandError| explain_input(e, &file.inputs);
    let locate = |at: &[&str]| json_locate(&clean, at);
    let src = Source {
        text: &clean,
        file: path,
        base: workspace.clone(),
        locate: &locate,
        lookup: &vars,
        explain: &explain,
    };
    let mut out: Vec<ServerConfig> = Vec::new();
    for (name, server) in servers.0 {
        if out.iter().any(|s| s.name == name) {
            return Err(src.error(
                &[root, &name],
                format!("server {name:?} is defined twice"),
                None,
            ));
        }
        out.push(json_server(&src, root, &name, server)?);
    }
    Ok(out)
}

fn json_server(
    src: &Source<'_>,
    root: &str,
    name: &str,
    raw: JsonServer,
) -> Result<ServerConfig, ConfigError> {
    let at_type = [root, name, "type"];
    let transport = match raw.kind.as_deref() {
        None => None,
        Some("stdio") => {
            if raw.command.is_none() {
                return Err(src.error(&at_type, "type \"stdio\" needs a `command`", None));
            }
            None
        }
        Some(
            kind @ ("http" | "streamable-http" | "streamableHttp" | "streamable_http" | "sse"),
        ) => {
            if raw.url.is_none() {
                return Err(src.error(&at_type, format!("type {kind:?} needs a `url`"), None));
            }
            Some(if kind == "sse" {
                UrlTransport::Sse
            } else {
                UrlTransport::Streamable
            })
        }
        Some(other) => {
            return Err(src.error(
                &at_type,
                format!("unknown server type {other:?}"),
                Some("use \"stdio\", \"http\" or \"sse\"".into()),
            ));
        }
    };
    let mut env = BTreeMap::new();
    if let Some(file) = &raw.env_file {
        let shown = format!("{root}.{name}.envFile");
        let env_path = src.path(&[root, name, "envFile"], &shown, file)?;
        env.extend(read_env_file(
            src,
            &[root, name, "envFile"],
            &shown,
            &env_path,
        )?);
    }
    for (key, value) in raw.env {
        let value = match value {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Null => continue,
            _ => {
                return Err(src.error(
                    &[root, name, "env", &key],
                    "an environment value must be a string",
                    None,
                ));
            }
        };
        env.insert(key, value);
    }
    let parts = Parts {
        command: raw.command,
        args: raw.args,
        env,
        cwd: raw.cwd,
        url: raw.url,
        headers: raw.headers,
        transport,
    };
    let mut server = build_server(src, root, name, parts)?;
    server.enabled = !raw.disabled;
    // Whoever can write this file can change what runs: its servers' launches are pinned.
    server.imported_from = src.file.map(Path::to_path_buf);
    if let (
        ServerTransport::Command {
            command, args, env, ..
        },
        SandboxSetting::Profile(profile),
    ) = (&server.transport, &mut server.sandbox)
    {
        let path_var = env.get("PATH").cloned().or_else(|| (src.lookup)("PATH"));
        let home = (src.lookup)("HOME").map(PathBuf::from);
        let limits = super::reach::Limits::new(home.as_deref(), src.file.as_slice());
        super::reach::widen(profile, command, args, path_var.as_deref(), &limits);
    }
    Ok(server)
}

const NOT_MCP_HINT: &str = "moat reads moat.toml, or the mcp.json / \
     claude_desktop_config.json of Claude, Cursor and VS Code";

/// The variables of imported files (see the module docs).
fn resolve(name: &str, workspace: &Path, lookup: Lookup<'_>) -> Option<String> {
    match name {
        "workspaceFolder" | "workspaceRoot" => Some(workspace.display().to_string()),
        "workspaceFolderBasename" => workspace
            .file_name()
            .map(|n| n.to_string_lossy().into_owned()),
        "userHome" => lookup("HOME"),
        "pathSeparator" | "/" => Some("/".into()),
        _ if name.contains(':') && !name.starts_with("env:") => None,
        _ => lookup(name.strip_prefix("env:").unwrap_or(name)),
    }
}

fn explain_input(e: &ExpandError, inputs: &[JsonInput]) -> Option<(String, String)> {
    let ExpandError::Unset { name } = e else {
        return None;
    };
    let id = name.strip_prefix("input:")?;
    let described = inputs
        .iter()
        .find(|i| i.id.as_deref() == Some(id))
        .and_then(|i| i.description.as_deref())
        .map(|d| format!(" ({d:?})"))
        .unwrap_or_default();
    Some((
        format!(
            "${{input:{id}}}{described} is a value VS Code prompts for, \
             and moat cannot prompt while loading its configuration"
        ),
        "set the value in moat.toml, or put it in an environment variable and write \
         ${env:VAR} here"
            .into(),
    ))
}

/// `.vscode/mcp.json` and `.cursor/mcp.json` belong to the folder above them.
fn workspace_dir(path: Option<&Path>) -> PathBuf {
    let dir = base_dir(path);
    match dir.file_name().and_then(|n| n.to_str()) {
        Some(".vscode" | ".cursor") => dir.parent().map_or(dir.clone(), Path::to_path_buf),
        _ => dir,
    }
}

fn read_env_file(
    src: &Source<'_>,
    at: &[&str],
    shown: &str,
    path: &Path,
) -> Result<Vec<(String, String)>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        src.error_at(
            (src.locate)(at),
            shown,
            format!("cannot read {}: {e}", path.display()),
            None,
        )
    })?;
    parse_env_file(&text).map_err(|(line, message)| {
        ConfigError::Invalid(Box::new(Diagnostic {
            file: Some(path.to_path_buf()),
            line: Some(line),
            column: None,
            field: String::new(),
            message,
            hint: Some("write KEY=VALUE, one a line".into()),
        }))
    })
}

/// `KEY=VALUE` lines: blank lines and `#` comments skipped, an optional `export `, values
/// optionally quoted (taken literally inside the quotes), ` #` starting a comment after an
/// unquoted value.
pub(crate) fn parse_env_file(text: &str) -> Result<Vec<(String, String)>, (usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err((i + 1, format!("expected KEY=VALUE, found {line:?}")));
        };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err((i + 1, format!("{key:?} is not a variable name")));
        }
        let value = value.trim();
        let quoted = ['"', '\'']
            .iter()
            .find(|q| value.len() >= 2 && value.starts_with(**q) && value.ends_with(**q));
        let value = match quoted {
            Some(_) => &value[1..value.len() - 1],
            None => value.split(" #").next().unwrap_or(value).trim_end(),
        };
        out.push((key.to_string(), value.to_string()));
    }
    Ok(out)
}

/// The offset of the key at `at` (a path of object keys), or of the deepest one found, by
/// searching for `"key":` after the previous one. Good enough to point at a line: the text
/// has been through [`strip_jsonc`], so keys in comments are gone.
fn json_locate(text: &str, at: &[&str]) -> Option<usize> {
    let mut from = 0;
    let mut found = None;
    for seg in at {
        let Some(pos) = find_key(text, from, seg) else {
            break;
        };
        found = Some(pos);
        from = pos + seg.len() + 2;
    }
    found
}

fn find_key(text: &str, mut from: usize, key: &str) -> Option<usize> {
    let needle = format!("\"{key}\"");
    loop {
        let pos = from + text.get(from..)?.find(&needle)?;
        let after = pos + needle.len();
        if text[after..].trim_start().starts_with(':') {
            return Some(pos);
        }
        from = after;
    }
}

/// serde_json ends its messages with " at line L column C"; we show the position first.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Blanks out `//` and `/* */` comments and trailing commas (VS Code writes JSONC), keeping
/// every other byte where it was so line and column numbers stay true.
pub(crate) fn strip_jsonc(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let mut commas = Vec::new();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (b, bytes.get(i + 1)) {
            (b'"', _) => in_string = true,
            (b',', _) => commas.push(i),
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    bytes[i] = b' ';
                    i += 1;
                }
                continue;
            }
            (b'/', Some(b'*')) => {
                let mut j = i;
                while j < bytes.len()
                    && !(bytes[j] == b'*' && bytes.get(j + 1) == Some(&b'/') && j > i + 1)
                {
                    if bytes[j] != b'\n' {
                        bytes[j] = b' ';
                    }
                    j += 1;
                }
                for k in j..(j + 2).min(bytes.len()) {
                    bytes[k] = b' ';
                }
                i = j + 2;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    for c in commas {
        let next = bytes[c + 1..].iter().find(|b| !b.is_ascii_whitespace());
        if matches!(next, Some(b'}' | b']')) {
            bytes[c] = b' ';
        }
    }
    // Only ASCII bytes were written over whole comments, so this holds; fall back anyway.
    String::from_utf8(bytes).unwrap_or_else(|_| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonc_keeps_positions() {
        let text =
            "{\n  // a comment, \"x\": 1\n  \"a\": [1, 2,], /* b\n c */ \"b\": \"//not\",\n}\n";
        let clean = strip_jsonc(text);
        assert_eq!(clean.len(), text.len());
        assert_eq!(clean.lines().count(), text.lines().count());
        let v: serde_json::Value = serde_json::from_str(&clean).unwrap();
        assert_eq!(v["a"], serde_json::json!([1, 2]));
        assert_eq!(v["b"], "//not");
        assert_eq!(clean.find("\"b\""), text.find("\"b\""));
        assert_eq!(strip_jsonc("{\"a\": \"x\\\",\"}"), "{\"a\": \"x\\\",\"}");
    }

    #[test]
    fn env_files() {
        let vars = parse_env_file(
            "# secrets\n\nexport A=1\nB = two words # note\nC=\"quoted # kept\"\nD='x=y'\nE=\n",
        )
        .unwrap();
        let want = [
            ("A", "1"),
            ("B", "two words"),
            ("C", "quoted # kept"),
            ("D", "x=y"),
            ("E", ""),
        ];
        let got: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
        assert_eq!(parse_env_file("A=1\noops\n").unwrap_err().0, 2);
    }

    #[test]
    fn keys_are_found_in_order() {
        let text = r#"{"servers": {"a": {"args": ["args"]}, "b": {"args": []}}}"#;
        let b = json_locate(text, &["servers", "b", "args"]).unwrap();
        assert_eq!(&text[b..b + 6], "\"args\"");
        assert!(b > text.find("\"b\"").unwrap());
        assert_eq!(
            json_locate(text, &["servers", "zz"]),
            text.find("\"servers\"")
        );
    }

    #[test]
    fn workspace_of_editor_folders() {
        assert_eq!(
            workspace_dir(Some(Path::new("/p/.vscode/mcp.json"))),
            PathBuf::from("/p")
        );
        assert_eq!(
            workspace_dir(Some(Path::new("/p/.cursor/mcp.json"))),
            PathBuf::from("/p")
        );
        assert_eq!(
            workspace_dir(Some(Path::new("/p/.mcp.json"))),
            PathBuf::from("/p")
        );
    }
}
