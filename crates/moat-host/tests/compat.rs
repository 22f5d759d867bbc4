//! `[compat]`: how tool schemas reach the gateway's clients.

use std::path::Path;

use moat_host::config::Config;
use moat_host::config::compat::SchemaMode;

fn env(_: &str) -> Option<String> {
    None
}

fn load(text: &str) -> Result<Config, moat_host::config::ConfigError> {
    Config::from_toml_str_with(text, Some(Path::new("moat.toml")), &env)
}

#[test]
fn schemas_default_to_as_is_and_take_portable() {
    assert_eq!(load("").expect("empty").compat.schemas, SchemaMode::AsIs);
    let c = load("[compat]\nschemas = \"as-is\"\n").expect("as-is");
    assert_eq!(c.compat.schemas, SchemaMode::AsIs);
    let c = load("[compat]\nschemas = \"portable\"\n").expect("portable");
    assert_eq!(c.compat.schemas, SchemaMode::Portable);
}

#[test]
fn a_wrong_value_or_key_names_the_field() {
    for (text, field) in [
        ("\n[compat]\nschemas = \"gemini\"\n", "compat.schemas"),
        ("\n[compat]\nschema = \"portable\"\n", "compat"),
    ] {
        let err = load(text).expect_err(text).to_string();
        assert!(err.contains(field), "{text:?}: {err}");
        assert!(
            err.contains("moat.toml:3"),
            "{text:?} names the line: {err}"
        );
    }
}
