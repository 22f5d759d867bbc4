//! `[servers.NAME.auth]`: the three ways it is written load as what they say, secrets come
//! only from the environment or a file and never show in `Debug`, and what does not fit is
//! refused at the key that is wrong.

use moat_host::config::{Config, ConfigError, DownstreamAuth};

fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let lookup = move |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    Config::from_toml_str_with(text, None, &lookup)
}

const URL: &str = "[servers.api]\nurl = \"https://api.example/mcp\"\n";

#[test]
fn static_defaults_to_a_bearer_authorization_header() {
    let c = load(
        &format!("{URL}[servers.api.auth]\nmode = \"static\"\nvalue_env = \"API_TOKEN\"\n"),
        &[("API_TOKEN", "tok-123")],
    )
    .unwrap();
    let auth = c.server("api").unwrap().auth.clone().unwrap();
    let DownstreamAuth::Static(s) = &auth else {
        panic!("{auth:?}")
    };
    assert_eq!(s.header, "Authorization");
    assert_eq!(s.value(), "Bearer tok-123");
    assert!(!auth.per_user());
    assert!(!format!("{c:?}").contains("tok-123"));

    let c = load(
        &format!(
            "{URL}[servers.api.auth]\nmode = \"static\"\nheader = \"X-Api-Key\"\nvalue_env = \"K\"\n"
        ),
        &[("K", "k1")],
    )
    .unwrap();
    let Some(DownstreamAuth::Static(s)) = &c.server("api").unwrap().auth else {
        panic!()
    };
    assert_eq!((s.header.as_str(), s.value()), ("X-Api-Key", "k1".into()));
}

#[test]
fn static_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t");
    std::fs::write(&file, "from-file\n").unwrap();
    let c = load(
        &format!(
            "{URL}[servers.api.auth]\nmode = \"static\"\nscheme = \"Token\"\nvalue_file = {:?}\n",
            file.to_string_lossy()
        ),
        &[],
    )
    .unwrap();
    let Some(DownstreamAuth::Static(s)) = &c.server("api").unwrap().auth else {
        panic!()
    };
    assert_eq!(s.value(), "Token from-file");
}

#[test]
fn exchange_defaults_its_resource_to_the_url() {
    let c = load(
        &format!(
            "{URL}[servers.api.auth]\nmode = \"exchange\"\nissuer = \"https://idp.example\"\n\
             client_id = \"gw\"\nclient_secret_env = \"S\"\nscope = \"api:read\"\n"
        ),
        &[("S", "gw-secret")],
    )
    .unwrap();
    let auth = c.server("api").unwrap().auth.clone().unwrap();
    let DownstreamAuth::Exchange(e) = &auth else {
        panic!("{auth:?}")
    };
    assert_eq!(e.resource, "https://api.example/mcp");
    assert_eq!(e.client_secret.expose(), "gw-secret");
    assert_eq!(e.scope.as_deref(), Some("api:read"));
    assert!(auth.per_user());
    assert!(!format!("{auth:?}").contains("gw-secret"));
}

#[test]
fn refusals_name_the_key() {
    for (table, needle, field) in [
        ("mode = \"static\"\n", "exactly one of", "servers.api.auth"),
        (
            "mode = \"static\"\nvalue_env = \"NOPE\"\n",
            "not set",
            "servers.api.auth.value_env",
        ),
        (
            "mode = \"static\"\nvalue_env = \"S\"\nissuer = \"https://i\"\n",
            "does not apply",
            "servers.api.auth.issuer",
        ),
        (
            "mode = \"static\"\nvalue_env = \"S\"\nheader = \"bad header\"\n",
            "not a header name",
            "servers.api.auth.header",
        ),
        (
            "mode = \"exchange\"\nclient_id = \"gw\"\nclient_secret_env = \"S\"\n",
            "needs `issuer`",
            "servers.api.auth",
        ),
        (
            "mode = \"exchange\"\nissuer = \"https://i\"\nclient_secret_env = \"S\"\n",
            "needs `client_id`",
            "servers.api.auth",
        ),
        (
            "mode = \"passthrough\"\n",
            "not a mode",
            "servers.api.auth.mode",
        ),
    ] {
        let e = load(&format!("{URL}[servers.api.auth]\n{table}"), &[("S", "x")]).unwrap_err();
        assert!(e.to_string().contains(needle), "{table}: {e}");
        assert_eq!(e.field(), Some(field), "{table}: {e}");
    }
    let e = load(
        "[servers.cmd]\ncommand = \"x\"\n[servers.cmd.auth]\nmode = \"static\"\nvalue_env = \"S\"\n",
        &[("S", "x")],
    )
    .unwrap_err();
    assert!(e.to_string().contains("url servers"), "{e}");
}

#[test]
fn oauth_needs_a_callback_it_can_listen_on() {
    let c = load(
        &format!(
            "{URL}[servers.api.auth]\nmode = \"oauth\"\ncallback = \"http://127.0.0.1:8765/cb\"\n\
             client_id = \"gw\"\nclient_secret_env = \"S\"\nkey_env = \"K\"\n"
        ),
        &[("S", "client-secret"), ("K", "ab")],
    )
    .unwrap();
    let auth = c.server("api").unwrap().auth.clone().unwrap();
    let DownstreamAuth::OAuth(o) = &auth else {
        panic!("{auth:?}")
    };
    assert_eq!(o.callback, "http://127.0.0.1:8765/cb");
    assert_eq!(o.client_id.as_deref(), Some("gw"));
    assert!(auth.per_user());
    let shown = format!("{auth:?}");
    assert!(
        !shown.contains("client-secret") && !shown.contains("\"ab\""),
        "{shown}"
    );

    for (table, needle, field) in [
        ("mode = \"oauth\"\n", "needs `callback`", "servers.api.auth"),
        (
            "mode = \"oauth\"\ncallback = \"not a url\"\n",
            "listen on",
            "servers.api.auth.callback",
        ),
        (
            "mode = \"oauth\"\ncallback = \"http://127.0.0.1:1/cb\"\nclient_secret_env = \"S\"\n",
            "needs its `client_id`",
            "servers.api.auth",
        ),
        (
            "mode = \"oauth\"\ncallback = \"http://127.0.0.1:1/cb\"\nvalue_env = \"S\"\n",
            "does not apply",
            "servers.api.auth.value_env",
        ),
        (
            "mode = \"static\"\nvalue_env = \"S\"\ncallback = \"http://127.0.0.1:1/cb\"\n",
            "does not apply",
            "servers.api.auth.callback",
        ),
    ] {
        let e = load(&format!("{URL}[servers.api.auth]\n{table}"), &[("S", "x")]).unwrap_err();
        assert!(e.to_string().contains(needle), "{table}: {e}");
        assert_eq!(e.field(), Some(field), "{table}: {e}");
    }
}
