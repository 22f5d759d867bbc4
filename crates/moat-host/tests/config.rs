//! The configuration loader against real-format files: moat.toml, Claude Desktop, Claude
//! Code, Cursor and VS Code; error locations; reloads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use moat_host::config::{
    Config, ConfigError, ConsentMode, SandboxSetting, ServerConfig, ServerTransport, UrlTransport,
};
use moat_host::watch::{ServersDiff, diff_servers, watch_every};
use moat_sandbox::Net;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A fixed environment, so tests never read the process's.
fn env(name: &str) -> Option<String> {
    let value = match name {
        "HOME" => "/home/ada",
        "USER" => "ada",
        "GITHUB_TOKEN" => "ghp_test",
        "BRAVE_API_KEY" => "brave",
        "LINEAR_TOKEN" => "lin",
        "API_KEY" => "k3y",
        "AIRTABLE_API_KEY" => "air",
        "CONTEXT7_API_KEY" => "c7",
        "PERPLEXITY_API_KEY" => "pplx",
        _ => return None,
    };
    Some(value.to_string())
}

fn without<'a>(missing: &'a str) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| if name == missing { None } else { env(name) }
}

fn load(path: &Path) -> Result<Config, ConfigError> {
    Config::load_with(path, &env)
}

fn command(s: &ServerConfig) -> (&str, &[String], &BTreeMap<String, String>, Option<&Path>) {
    match &s.transport {
        ServerTransport::Command {
            command,
            args,
            env,
            cwd,
        } => (command, args, env, cwd.as_deref()),
        other => panic!("{}: not a command server: {other:?}", s.name),
    }
}

fn url(s: &ServerConfig) -> (&str, &BTreeMap<String, String>, UrlTransport) {
    match &s.transport {
        ServerTransport::Url {
            url,
            headers,
            transport,
        } => (url, headers, *transport),
        other => panic!("{}: not a url server: {other:?}", s.name),
    }
}

fn names(c: &Config) -> Vec<&str> {
    c.servers.iter().map(|s| s.name.as_str()).collect()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The line (1-based) of the first occurrence of `needle` in `path`.
fn line_of(path: &Path, needle: &str) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in {path:?}"));
    text[..at].matches('\n').count() + 1
}

#[test]
fn the_annotated_moat_toml_uses_everything() {
    let dir = fixtures();
    let path = dir.join("moat.toml");
    let c = load(&path).unwrap();
    assert_eq!(c.path.as_deref(), Some(path.as_path()));
    assert_eq!(
        names(&c),
        [
            "fs",
            "search",
            "legacy",
            "linear",
            "filesystem",
            "github",
            "sqlite"
        ]
    );
    assert_eq!(c.imports, [dir.join("claude_desktop_config.json")]);
    assert_eq!(
        c.state_dir,
        Some(PathBuf::from("/home/ada/.local/state/moat"))
    );
    assert_eq!(c.consent.mode, ConsentMode::Auto);
    assert_eq!(c.consent.timeout, Duration::from_secs(120));
    assert_eq!(c.tool_search.mode, moat_host::SearchMode::Auto);
    assert_eq!(
        (
            c.tool_search.max_tools,
            c.tool_search.max_tokens,
            c.tool_search.limit
        ),
        (40, 10_000, 8)
    );
    assert_eq!(c.tool_search.always, ["fs__read_*"]);

    let fs = &c.servers[0];
    let (cmd, args, vars, cwd) = command(fs);
    assert_eq!(cmd, "moat");
    assert_eq!(args, strings(&["serve", "fs", "--root", "."]));
    assert_eq!(vars.get("RUST_LOG").map(String::as_str), Some("info"));
    let here = dir.join(".");
    assert_eq!(cwd, Some(here.as_path()));
    assert_eq!(fs.call_timeout, Some(Duration::from_secs(30)));
    let p = fs.profile().unwrap();
    assert_eq!(p.ro, std::slice::from_ref(&here));
    assert_eq!(p.rw, [dir.join("notes")]);
    assert_eq!(p.net, Net::None);
    assert_eq!(p.limits.memory_bytes, Some(536_870_912));
    assert_eq!(p.limits.pids, Some(64));
    assert_eq!(p.limits.timeout, None);

    let search = &c.servers[1];
    assert_eq!(command(search).2["BRAVE_API_KEY"], "brave");
    assert_eq!(search.trust.untrusted, Some(true));
    assert_eq!((search.trust.private, search.trust.sink), (None, None));
    let Net::Allow(hosts) = search.profile().unwrap().net else {
        panic!("search should have an allow-list")
    };
    assert_eq!(hosts.len(), 2);

    let legacy = &c.servers[2];
    assert!(!legacy.enabled);
    assert_eq!(legacy.sandbox, SandboxSetting::Off);
    assert_eq!(legacy.profile(), None);

    let linear = &c.servers[3];
    let (u, headers, transport) = url(linear);
    assert_eq!(u, "https://mcp.linear.app/mcp");
    assert_eq!(headers["Authorization"], "Bearer lin");
    assert_eq!(transport, UrlTransport::Streamable);
    assert_eq!(linear.trust.private, Some(true));
    assert_eq!(linear.trust.sink, Some(true));
    assert_eq!(linear.profile(), None);

    let github = c.server("github").unwrap();
    assert_eq!(
        command(github).2["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "ghp_test"
    );
}

/// The fixtures with their variables made required (the example gives them empty
/// defaults, so that it loads as shipped), in a directory of their own.
fn with_required_variables() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["moat.toml", "claude_desktop_config.json"] {
        let text = std::fs::read_to_string(fixtures().join(name)).expect("read a fixture");
        let text = text
            .replace("${BRAVE_API_KEY:-}", "${BRAVE_API_KEY}")
            .replace("${GITHUB_TOKEN:-}", "${GITHUB_TOKEN}");
        std::fs::write(dir.path().join(name), text).expect("write a fixture copy");
    }
    std::fs::create_dir_all(dir.path().join("notes")).expect("notes/");
    let path = dir.path().join("moat.toml");
    let desktop = dir.path().join("claude_desktop_config.json");
    (dir, path, desktop)
}

#[test]
fn the_example_loads_with_none_of_its_variables_set() {
    let path = fixtures().join("moat.toml");
    // Only what every shell has: HOME.
    let home = |name: &str| (name == "HOME").then(|| "/home/ada".to_owned());
    let c = Config::load_with(&path, &home).expect("the example loads as shipped");
    assert!(c.server("fs").is_some_and(|s| s.enabled));
    assert!(c.server("search").is_some_and(|s| !s.enabled));
}

#[test]
fn a_missing_variable_names_itself_the_field_and_the_line() {
    let (_dir, path, desktop) = with_required_variables();
    let e = Config::load_with(&path, &without("BRAVE_API_KEY")).unwrap_err();
    let text = e.to_string();
    assert_eq!(
        e.field(),
        Some("servers.search.env.BRAVE_API_KEY"),
        "{text}"
    );
    assert_eq!(e.line(), Some(line_of(&path, "${BRAVE_API_KEY}")), "{text}");
    assert!(text.contains("BRAVE_API_KEY is not set"), "{text}");
    assert!(text.contains("${BRAVE_API_KEY:-value}"), "{text}");
    assert!(text.starts_with(&format!("{}:", path.display())), "{text}");

    // The same in an imported file: the error is in that file.
    let e = Config::load_with(&path, &without("GITHUB_TOKEN")).unwrap_err();
    assert_eq!(e.file(), Some(desktop.as_path()), "{e}");
    assert_eq!(e.line(), Some(line_of(&desktop, "${GITHUB_TOKEN}")), "{e}");
    assert_eq!(
        e.field(),
        Some("mcpServers.github.env.GITHUB_PERSONAL_ACCESS_TOKEN")
    );
}

#[test]
fn claude_desktop() {
    let dir = fixtures();
    let c = load(&dir.join("claude_desktop_config.json")).unwrap();
    assert_eq!(names(&c), ["filesystem", "github", "sqlite"]);
    let (cmd, args, vars, cwd) = command(&c.servers[0]);
    assert_eq!(cmd, "npx");
    assert_eq!(
        args,
        strings(&[
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/Users/ada/Desktop",
            "/Users/ada/Downloads"
        ])
    );
    assert!(vars.is_empty() && cwd.is_none());
    assert_eq!(
        command(&c.servers[1]).2["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "ghp_test"
    );
    for s in &c.servers {
        assert!(s.enabled);
        let p = s.profile().expect("imported servers are sandboxed");
        assert_eq!(p.ro, std::slice::from_ref(&dir));
        assert!(p.system_ro && p.namespaces && p.net == Net::None);
    }
    assert_eq!(c.consent, Default::default());
    assert_eq!(c.state_dir, None);
}

#[test]
fn claude_code() {
    let path = fixtures().join("claude-code/.mcp.json");
    let c = load(&path).unwrap();
    assert_eq!(names(&c), ["sentry", "asana", "api-server", "airtable"]);
    assert_eq!(
        url(&c.servers[0]),
        (
            "https://mcp.sentry.dev/mcp",
            &BTreeMap::new(),
            UrlTransport::Streamable
        )
    );
    assert_eq!(url(&c.servers[1]).2, UrlTransport::Sse);
    let (u, headers, _) = url(&c.servers[2]);
    assert_eq!(u, "https://api.example.com/mcp", "the default applies");
    assert_eq!(headers["Authorization"], "Bearer k3y");
    assert_eq!(command(&c.servers[3]).2["AIRTABLE_API_KEY"], "air");

    let with_base = |name: &str| match name {
        "API_BASE_URL" => Some("http://127.0.0.1:9000".to_string()),
        other => env(other),
    };
    let c = Config::load_with(&path, &with_base).unwrap();
    assert_eq!(url(&c.servers[2]).0, "http://127.0.0.1:9000/mcp");

    let e = Config::load_with(&path, &without("API_KEY")).unwrap_err();
    assert_eq!(
        e.field(),
        Some("mcpServers.api-server.headers.Authorization")
    );
    assert_eq!(e.line(), Some(line_of(&path, "${API_KEY}")), "{e}");
}

#[test]
fn cursor() {
    let workspace = fixtures().join("cursor");
    let c = load(&workspace.join(".cursor/mcp.json")).unwrap();
    assert_eq!(names(&c), ["context7", "linear", "postgres", "playwright"]);
    let (u, headers, transport) = url(&c.servers[0]);
    assert_eq!(u, "https://mcp.context7.com/mcp");
    assert_eq!(headers["CONTEXT7_API_KEY"], "c7");
    assert_eq!(transport, UrlTransport::Auto, "no type: try both");
    assert_eq!(url(&c.servers[1]).2, UrlTransport::Auto);
    let vars = command(&c.servers[2]).2;
    assert_eq!(vars["PGUSER"], "ada");
    assert_eq!(vars["PGPASSWORD"], "s3cret # not a comment");
    // The workspace is the folder above .cursor.
    assert_eq!(c.servers[3].profile().unwrap().ro, [workspace]);
}

#[test]
fn vscode_inputs_are_refused_with_a_way_out() {
    let workspace = fixtures().join("vscode");
    let path = workspace.join(".vscode/mcp.json");
    let e = load(&path).unwrap_err();
    let text = e.to_string();
    assert_eq!(
        e.field(),
        Some("servers.perplexity.env.PERPLEXITY_API_KEY"),
        "{text}"
    );
    assert_eq!(
        e.line(),
        Some(line_of(&path, "${input:perplexity-key}")),
        "{text}"
    );
    assert!(text.contains("Perplexity API Key"), "{text}");
    assert!(
        text.contains("moat.toml") && text.contains("${env:"),
        "{text}"
    );

    // Following the hint: the rest of the file, comments and trailing comma included.
    let original = std::fs::read_to_string(&path).unwrap();
    let fixed = original.replace("${input:perplexity-key}", "${env:PERPLEXITY_API_KEY}");
    let c = Config::from_json_str_with(&fixed, Some(&path), &env).unwrap();
    assert_eq!(names(&c), ["playwright", "dbhub", "perplexity", "github"]);
    let ws = workspace.display().to_string();
    assert_eq!(
        command(&c.servers[0]).1[3],
        format!("{ws}/playwright-mcp-config.json")
    );
    let (_, _, vars, cwd) = command(&c.servers[1]);
    assert_eq!(
        vars["DSN"], "postgres://ada@localhost:5432/dbname",
        "env wins"
    );
    assert_eq!(vars["READONLY"], "true", "from the envFile");
    let db = workspace.join("db");
    assert_eq!(cwd, Some(db.as_path()));
    assert_eq!(c.servers[1].profile().unwrap().ro, [db]);
    assert_eq!(command(&c.servers[2]).2["PERPLEXITY_API_KEY"], "pplx");
    let (u, headers, transport) = url(&c.servers[3]);
    assert_eq!(u, "https://api.githubcopilot.com/mcp/");
    assert_eq!(headers["Authorization"], "Bearer ghp_test");
    assert_eq!(transport, UrlTransport::Streamable);
}

#[test]
fn json_is_recognised_by_content_and_its_errors_are_located() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("servers");
    std::fs::write(&path, "{\"mcpServers\": {\"a\": {\"command\": \"x\"}}}").unwrap();
    assert_eq!(names(&load(&path).unwrap()), ["a"]);

    let json = |text: &str| Config::from_json_str_with(text, Some(Path::new("mcp.json")), &env);
    let e =
        json("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\", \"args\": \"y\"}\n  }\n}")
            .unwrap_err();
    assert_eq!(e.field(), Some("mcpServers.a.args"), "{e}");
    assert_eq!(e.line(), Some(3), "{e}");
    assert!(e.to_string().starts_with("mcp.json:3:"), "{e}");
    assert!(e.to_string().contains("expected a sequence"), "{e}");

    let e = json("{\"mcpServers\": {\n\"a\": {\"command\": \"x\"}\n").unwrap_err();
    assert_eq!(e.line(), Some(3), "{e}");
    let e = json("{\"preferences\": {}}").unwrap_err();
    assert!(e.to_string().contains("mcpServers"), "{e}");
    let e = json("{\"mcpServers\": {\"a\": {\"command\": \"x\"}, \"a\": {\"command\": \"y\"}}}")
        .unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
    let e = json("{\"mcpServers\": {\n\"my server\": {\"command\": \"x\"}}}").unwrap_err();
    assert_eq!(e.line(), Some(2), "{e}");
    let e = json("{\"mcpServers\": {\"a\": {\"type\": \"ws\", \"url\": \"ws://h\"}}}").unwrap_err();
    assert_eq!(e.field(), Some("mcpServers.a.type"), "{e}");

    let c = json(
        "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"disabled\": true, \
         \"env\": {\"N\": 3, \"GONE\": null}}}}",
    )
    .unwrap();
    assert!(!c.servers[0].enabled);
    assert_eq!(command(&c.servers[0]).2.len(), 1);
    assert_eq!(command(&c.servers[0]).2["N"], "3");
}

#[test]
fn malformed_toml_gives_file_and_line() {
    let path = Path::new("conf/moat.toml");
    let e =
        Config::from_toml_str_with("[servers.fs]\ncommand = \"a\nargs = []\n", Some(path), &env)
            .unwrap_err();
    assert_eq!(e.line(), Some(2), "{e}");
    assert!(e.to_string().starts_with("conf/moat.toml:2:"), "{e}");
}

#[test]
fn a_wrong_type_gives_file_line_column_and_field() {
    let text = "# servers\n\n[servers.fs]\ncommand = \"moat\"\nargs = \"x\"\n";
    let e = Config::from_toml_str_with(text, Some(Path::new("moat.toml")), &env).unwrap_err();
    assert_eq!(
        e.to_string(),
        "moat.toml:5:8: servers.fs.args: invalid type: string \"x\", expected a sequence"
    );
    assert_eq!((e.line(), e.column()), (Some(5), Some(8)));

    let e = Config::from_toml_str_with(
        "[servers.fs]\ncommand = \"moat\"\ncall_timeout = \"soon\"\n",
        Some(Path::new("moat.toml")),
        &env,
    )
    .unwrap_err();
    assert_eq!(
        (e.line(), e.field()),
        (Some(3), Some("servers.fs.call_timeout")),
        "{e}"
    );
    assert!(e.to_string().contains("\"30s\""), "{e}");
}

#[test]
fn unknown_keys_are_errors_with_their_line() {
    let toml = |text: &str| Config::from_toml_str_with(text, Some(Path::new("moat.toml")), &env);
    let e = toml("[servers.fs]\ncomand = \"moat\"\n").unwrap_err();
    assert_eq!(e.line(), Some(2), "{e}");
    assert_eq!(e.field(), Some("servers.fs.comand"), "{e}");
    assert!(e.to_string().contains("comand"), "{e}");
    let e = toml("\n\nstate_dirr = \"x\"\n").unwrap_err();
    assert_eq!(e.line(), Some(3), "{e}");
    let e = toml("[consent]\nmode = \"auto\"\nwait = 3\n").unwrap_err();
    assert_eq!(e.line(), Some(3), "{e}");
    let e = toml("[policy]\nnot_a_policy_key_anyone_would_add = 1\n").unwrap_err();
    assert_eq!(e.line(), Some(2), "{e}");
}

/// `dir/moat.toml` importing the Claude Desktop fixture (line 1), a blank line, then `rest`.
fn importing_desktop(dir: &Path, rest: &str) -> PathBuf {
    let desktop = fixtures().join("claude_desktop_config.json");
    let moat = dir.join("moat.toml");
    let text = format!("import = {:?}\n\n{rest}", desktop.display().to_string());
    std::fs::write(&moat, text).unwrap();
    moat
}

#[test]
fn a_name_defined_twice_through_import_names_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let desktop = fixtures().join("claude_desktop_config.json");
    let moat = importing_desktop(dir.path(), "[servers.github]\ncommand = \"gh-mcp\"\n");
    let e = load(&moat).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("\"github\""), "{text}");
    assert!(text.contains(&moat.display().to_string()), "{text}");
    assert!(text.contains(&desktop.display().to_string()), "{text}");
    assert_eq!(e.line(), Some(3), "at the moat.toml definition: {text}");

    // Two imports that clash.
    let other = dir.path().join("mcp.json");
    std::fs::write(
        &other,
        "{\"mcpServers\": {\"sqlite\": {\"command\": \"x\"}}}",
    )
    .unwrap();
    std::fs::write(
        &moat,
        format!(
            "import = [{:?}, \"mcp.json\"]\n",
            desktop.display().to_string()
        ),
    )
    .unwrap();
    let e = load(&moat).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("\"sqlite\""), "{text}");
    assert!(text.contains(&desktop.display().to_string()), "{text}");
    assert!(text.contains(&other.display().to_string()), "{text}");
    assert_eq!(e.field(), Some("import[1]"), "{text}");

    std::fs::write(&moat, "import = \"nowhere.json\"\n").unwrap();
    let e = load(&moat).unwrap_err();
    assert_eq!((e.line(), e.field()), (Some(1), Some("import")), "{e}");
}

/// With `import`, `[servers.NAME]` without `command` or `url` adjusts the imported server of
/// that name: its sandbox, labels, timeout and whether it runs; how it starts stays the file's.
#[test]
fn moat_toml_adjusts_an_imported_server() {
    let dir = tempfile::tempdir().unwrap();
    let moat = importing_desktop(
        dir.path(),
        "[servers.filesystem]\nsandbox = { rw = [\"/srv/shared\"], net = \"host\" }\n\
         untrusted = true\ncall_timeout = \"5s\"\n\n[servers.sqlite]\nenabled = false\n",
    );
    let c = load(&moat).unwrap();
    assert_eq!(names(&c), ["filesystem", "github", "sqlite"]);
    let fs = &c.servers[0];
    assert_eq!(command(fs).0, "npx", "the start command stays the file's");
    let profile = fs.profile().expect("still sandboxed");
    assert_eq!(profile.rw, [PathBuf::from("/srv/shared")]);
    let imported = c.servers[1].profile().expect("github is sandboxed");
    assert_eq!(
        profile.ro, imported.ro,
        "`ro` not given: the import's paths stay"
    );
    assert_eq!(profile.net, Net::Host);
    assert_eq!(fs.trust.untrusted, Some(true));
    assert_eq!(fs.call_timeout, Some(Duration::from_secs(5)));
    assert!(
        c.servers[1].enabled,
        "an adjustment elsewhere leaves github alone"
    );
    assert!(!c.servers[2].enabled);
}

/// `ro` and `rw` in an adjustment add to what the import's command line was given.
#[test]
fn an_adjustment_adds_paths_to_the_imported_ones() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let folder = root.join("notes");
    std::fs::create_dir(&folder).unwrap();
    let json = root.join("mcp.json");
    std::fs::write(
        &json,
        serde_json::json!({"mcpServers": {"files": {"command": "files-server", "args": [folder]}}})
            .to_string(),
    )
    .unwrap();
    let moat = root.join("moat.toml");
    std::fs::write(
        &moat,
        "import = \"mcp.json\"\n[servers.files]\nsandbox = { rw = [\"/srv/cache\"], ro = [\"/srv/ref\"] }\n",
    )
    .unwrap();
    let c = load(&moat).unwrap();
    let profile = c.servers[0].profile().unwrap();
    assert_eq!(profile.rw, [folder, PathBuf::from("/srv/cache")]);
    assert_eq!(profile.ro, [root.clone(), PathBuf::from("/srv/ref")]);
}

#[test]
fn an_adjustment_of_an_import_cannot_change_how_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let moat = importing_desktop(dir.path(), "[servers.github]\nargs = [\"--read-only\"]\n");
    let e = load(&moat).unwrap_err();
    let text = e.to_string();
    assert_eq!(
        (e.line(), e.field()),
        (Some(4), Some("servers.github.args")),
        "{text}"
    );
    assert!(text.contains("imported file"), "{text}");

    // A name no import defines is a server without a command, as before.
    let moat = importing_desktop(dir.path(), "[servers.ghost]\nenabled = false\n");
    let e = load(&moat).unwrap_err();
    let text = e.to_string();
    assert_eq!(e.line(), Some(3), "{text}");
    assert!(
        text.contains("no imported file defines a server \"ghost\""),
        "{text}"
    );
}

/// What the virtualenv's Python running `srv/app/script.py` reads, in order: the moat.toml's
/// folder (the default), the virtualenv, the interpreter it links to, the script's folder.
const PYTHON_SCRIPT_RO: [&str; 4] = ["conf", "project/.venv", "opt/python/3.12", "srv/app"];

/// A scratch tree for the reach of moat.toml servers, real paths: a Python installation and a
/// virtualenv made from it, a script, a folder to work on, a home directory, and `conf/`
/// for the moat.toml.
struct Reach {
    _guard: tempfile::TempDir,
    root: PathBuf,
}

impl Reach {
    fn new() -> Reach {
        let guard = tempfile::tempdir().unwrap();
        let root = guard.path().canonicalize().unwrap();
        let python = root.join("opt/python/3.12/bin/python3.12");
        let venv_bin = root.join("project/.venv/bin");
        for dir in [
            python.parent().unwrap(),
            &venv_bin,
            &root.join("srv/app"),
            &root.join("work"),
            &root.join("home/Documents"),
            &root.join("conf"),
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&python, "").unwrap();
        std::os::unix::fs::symlink(&python, venv_bin.join("python")).unwrap();
        std::fs::write(root.join("srv/app/script.py"), "").unwrap();
        Reach {
            _guard: guard,
            root,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn paths(&self, rels: &[&str]) -> Vec<PathBuf> {
        rels.iter().map(|rel| self.path(rel)).collect()
    }

    fn s(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    /// Writes `conf/moat.toml` and loads it with `HOME` the scratch home directory.
    fn load(&self, text: &str) -> Config {
        let moat = self.path("conf/moat.toml");
        std::fs::write(&moat, text).unwrap();
        let home = self.s("home");
        let vars = move |name: &str| (name == "HOME").then(|| home.clone());
        Config::load_with(&moat, &vars).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// `[servers.NAME]` running the virtualenv's Python with `args`, then `rest`.
    fn python_server(&self, name: &str, args: &[String], rest: &str) -> String {
        format!(
            "[servers.{name}]\ncommand = {:?}\nargs = {args:?}\n{rest}\n",
            self.s("project/.venv/bin/python")
        )
    }

    fn script_and_work(&self) -> Vec<String> {
        vec![self.s("srv/app/script.py"), self.s("work")]
    }
}

/// A command server written in moat.toml gets what its command line names, as an imported
/// one does: the interpreter's installation (the virtualenv and what it links to) and the
/// script's folder read-only, the folder it is given read-write.
#[test]
fn a_moat_toml_server_reaches_what_its_command_line_names() {
    let r = Reach::new();
    let bare = format!(
        "[servers.bare]\ncommand = \"python3.12\"\nenv = {{ PATH = {:?} }}\n",
        r.s("opt/python/3.12/bin")
    );
    let c = r.load(&format!(
        "{}{}{bare}",
        r.python_server("py", &r.script_and_work(), ""),
        r.python_server("on", &r.script_and_work(), "sandbox = true"),
    ));
    let p = c.servers[0].profile().unwrap();
    assert_eq!(p.ro, r.paths(&PYTHON_SCRIPT_RO));
    assert_eq!(p.rw, [r.path("work")]);
    assert_eq!(p.net, Net::None, "never the network");
    assert_eq!(
        c.servers[1].profile(),
        Some(p),
        "`sandbox = true` is the same"
    );
}

/// The refusals hold for moat.toml servers: never `/`, the home directory, the system or the
/// kernel's directories; the folders holding the moat.toml and its imports only read-only.
#[test]
fn a_moat_toml_server_told_to_serve_everything_gets_nothing_for_it() {
    let r = Reach::new();
    let shared = r.path("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("mcp.json"), r#"{"mcpServers": {}}"#).unwrap();
    let args: Vec<String> = [
        "/",
        "${HOME}",
        "/proc",
        "/etc",
        "/tmp",
        &r.s("conf"),
        &r.s("shared"),
        &r.s("home/Documents"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let c = r.load(&format!(
        "import = {:?}\n{}",
        r.s("shared/mcp.json"),
        r.python_server("py", &args, "")
    ));
    let p = c.servers[0].profile().unwrap();
    assert_eq!(
        p.rw,
        [r.path("home/Documents")],
        "only the folder below the home"
    );
    assert_eq!(
        p.ro,
        r.paths(&["conf", "project/.venv", "opt/python/3.12", "shared"]),
        "the configuration's folders read-only, nothing for the rest"
    );
}

/// An imported server, widened when its file was read, cannot write the folder of the
/// moat.toml that imports it either.
#[test]
fn an_imported_server_cannot_write_the_importing_moat_toml() {
    let r = Reach::new();
    std::fs::write(
        r.path("shared.json"),
        serde_json::json!({"mcpServers": {"files": {
            "command": "files-server",
            "args": [r.path("conf"), r.path("work")]
        }}})
        .to_string(),
    )
    .unwrap();
    let c = r.load("import = \"../shared.json\"\n");
    let p = c.servers[0].profile().unwrap();
    assert_eq!(p.rw, [r.path("work")]);
    assert!(p.ro.contains(&r.path("conf")), "{:?}", p.ro);
}

/// A `sandbox` table's `ro` and `rw` add to what the command line reaches; its other keys
/// replace; `sandbox = false` runs the server unconfined, as before.
#[test]
fn a_moat_toml_sandbox_table_adds_to_the_reach() {
    let r = Reach::new();
    let c = r.load(&format!(
        "{}{}",
        r.python_server(
            "py",
            &r.script_and_work(),
            "sandbox = { ro = [\"/srv/ref\", \"data\"], rw = [\"/srv/cache\"], net = \"host\" }"
        ),
        r.python_server("bare", &r.script_and_work(), "sandbox = false"),
    ));
    let p = c.servers[0].profile().unwrap();
    let mut ro = r.paths(&PYTHON_SCRIPT_RO);
    ro.extend([PathBuf::from("/srv/ref"), r.path("conf/data")]);
    assert_eq!(p.ro, ro);
    assert_eq!(p.rw, [r.path("work"), PathBuf::from("/srv/cache")]);
    assert_eq!(p.net, Net::Host);
    assert_eq!(c.servers[1].sandbox, SandboxSetting::Off);
    assert_eq!(c.servers[1].profile(), None);
}

#[test]
fn diffs_name_what_to_restart() {
    let a = ServerConfig::command("a", "a", vec![]);
    let b = ServerConfig::command("b", "b", vec![]);
    let c = ServerConfig::url("c", "https://c.example/mcp");
    let mut b2 = b.clone();
    b2.call_timeout = Some(Duration::from_secs(5));
    let d = ServerConfig::command("d", "d", vec![]);
    let diff = diff_servers(&[a.clone(), b, c], &[d, b2, a]);
    assert_eq!(
        diff,
        ServersDiff {
            added: vec!["d".into()],
            removed: vec!["c".into()],
            changed: vec!["b".into()],
        }
    );
    let same = diff_servers(
        &[ServerConfig::url("c", "https://c.example/mcp")],
        &[ServerConfig::url("c", "https://c.example/mcp")],
    );
    assert!(same.is_empty());
}

/// Waits for a reload whose servers are `want` (a SIGHUP from the other test may bring
/// reloads of an unchanged file first).
async fn reload_to(
    rx: &mut tokio::sync::mpsc::Receiver<Result<Config, ConfigError>>,
    want: &[&str],
) -> Config {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("no reload in time")
            .expect("watch ended");
        if let Ok(c) = got
            && names(&c) == want
        {
            return c;
        }
    }
}

#[tokio::test]
async fn watch_notices_a_rewrite_a_replace_and_an_import() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moat.toml");
    let imported = dir.path().join("mcp.json");
    std::fs::write(&imported, "{\"mcpServers\": {\"i\": {\"command\": \"i\"}}}").unwrap();
    std::fs::write(
        &path,
        "import = \"mcp.json\"\n[servers.a]\ncommand = \"a\"\n",
    )
    .unwrap();
    let mut rx = watch_every(path.clone(), Duration::from_millis(50));
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Rewritten in place.
    std::fs::write(
        &path,
        "import = \"mcp.json\"\n[servers.b]\ncommand = \"b\"\n",
    )
    .unwrap();
    reload_to(&mut rx, &["b", "i"]).await;

    // Replaced by rename, as editors do.
    let tmp = dir.path().join(".moat.toml.swp");
    std::fs::write(
        &tmp,
        "import = \"mcp.json\"\n[servers.c]\ncommand = \"c\"\n",
    )
    .unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    reload_to(&mut rx, &["c", "i"]).await;

    // The imported file changed.
    std::fs::write(&imported, "{\"mcpServers\": {\"j\": {\"command\": \"j\"}}}").unwrap();
    reload_to(&mut rx, &["c", "j"]).await;

    // A broken file is reported, and the fix is picked up.
    std::fs::write(&path, "[servers.c\n").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap()
            .unwrap();
        if let Err(e) = got {
            assert_eq!(e.line(), Some(1), "{e}");
            break;
        }
    }
    std::fs::write(&path, "[servers.d]\ncommand = \"d\"\n").unwrap();
    reload_to(&mut rx, &["d"]).await;
}

#[tokio::test]
async fn sighup_reloads_an_unchanged_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moat.toml");
    std::fs::write(&path, "[servers.h]\ncommand = \"h\"\n").unwrap();
    let mut rx = watch_every(path, Duration::from_secs(3600));
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("no reload after SIGHUP")
        .unwrap()
        .unwrap();
    assert_eq!(names(&got), ["h"]);
}

#[test]
fn tool_search_errors_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moat.toml");
    for (text, field) in [
        ("[tool_search]\nmode = \"sometimes\"\n", "tool_search.mode"),
        ("[tool_search]\nlimit = 0\n", "tool_search.limit"),
        (
            "[tool_search]\nalways = [\"fs__[\"]\n",
            "tool_search.always",
        ),
        ("[tool_search]\nmodle = \"x\"\n", "tool_search"),
    ] {
        std::fs::write(&path, text).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains(field), "{text:?}: {err}");
        assert!(
            err.contains("moat.toml:2"),
            "{text:?} names the line: {err}"
        );
    }
}
