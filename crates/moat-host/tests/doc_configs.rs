//! Every moat.toml shown in README.md and docs/ loads as written: each ```toml block is
//! parsed as a configuration (variables filled in from a fixed environment), so a renamed
//! key or a changed grammar fails here instead of in a user's first run. A block that is
//! not a moat.toml says so on its first line (`# not a moat.toml: …`).

use std::path::{Path, PathBuf};

use moat_host::Config;

fn markdown_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read docs/") {
            let path = entry.expect("a docs/ entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// (line, text) of each ```toml block in `text`.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut current {
            None if trimmed == "```toml" => {
                let indent = line.len() - trimmed.len();
                current = Some((n + 1, " ".repeat(indent), String::new()));
            }
            Some((start, indent, body)) => {
                if trimmed == "```" {
                    blocks.push((*start, std::mem::take(body)));
                    current = None;
                } else {
                    body.push_str(line.strip_prefix(indent.as_str()).unwrap_or(line));
                    body.push('\n');
                }
            }
            None => {}
        }
    }
    blocks
}

/// A home directory holding what the docs' examples import: a Claude Desktop
/// configuration with a `github` server.
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("a temporary home");
    let claude = home.path().join(".config/Claude");
    std::fs::create_dir_all(&claude).expect("create .config/Claude");
    std::fs::write(
        claude.join("claude_desktop_config.json"),
        r#"{"mcpServers": {"github": {"command": "github-mcp-server", "args": ["stdio"]}}}"#,
    )
    .expect("write claude_desktop_config.json");
    home
}

#[test]
fn every_moat_toml_in_the_docs_loads() {
    let home = home();
    let home_dir = home.path().to_string_lossy().into_owned();
    let lookup = move |name: &str| -> Option<String> {
        match name {
            "HOME" => Some(home_dir.clone()),
            _ => Some(format!("{}-value", name.to_lowercase())),
        }
    };
    let at = home.path().join(".config/moat/moat.toml");
    let mut failures = Vec::new();
    let mut loaded = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).expect("read a markdown file");
        for (line, block) in toml_blocks(&text) {
            if block.trim_start().starts_with("# not a moat.toml") {
                continue;
            }
            match Config::from_toml_str_with(&block, Some(&at), &lookup) {
                Ok(_) => loaded += 1,
                Err(e) => failures.push(format!("{}:{line}: {e}\n{block}", file.display())),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} configurations in the docs do not load:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(
        loaded >= 5,
        "only {loaded} configurations found in the docs"
    );
}
