//! The Protected Resource Metadata document (RFC 9728 §2) and the paths it is served at.

use serde_json::json;
use url::Url;

use super::ResourceOptions;

/// The document: this resource, its authorization servers, its scopes, tokens in the header.
pub(super) fn document(options: &ResourceOptions) -> String {
    let servers: Vec<&str> = std::iter::once(options.issuer.as_str())
        .chain(options.issuers.iter().map(|i| i.issuer.as_str()))
        .collect();
    let mut doc = json!({
        "resource": options.resource,
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
    });
    if !options.scopes.is_empty() {
        doc["scopes_supported"] = json!(options.scopes);
    }
    doc.to_string()
}

/// The request paths the document answers at: the root well-known URI and, for a resource
/// with a path, the path-suffixed one (RFC 9728 §3.1) that clients try first.
pub(crate) fn well_known_paths(resource: &str) -> Vec<String> {
    const ROOT: &str = "/.well-known/oauth-protected-resource";
    let mut out = vec![ROOT.to_owned()];
    if let Ok(url) = Url::parse(resource) {
        let path = url.path().trim_end_matches('/');
        if !path.is_empty() {
            out.push(format!("{ROOT}{path}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_with_and_without_suffix() {
        assert_eq!(
            well_known_paths("https://mcp.example/mcp"),
            [
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-protected-resource/mcp"
            ]
        );
        assert_eq!(
            well_known_paths("https://mcp.example/"),
            ["/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn the_document_names_issuer_and_scopes() {
        let mut o = ResourceOptions::new("https://as.example", "https://mcp.example/mcp");
        o.scopes = vec!["mcp:tools".into()];
        let doc: serde_json::Value = serde_json::from_str(&document(&o)).unwrap();
        assert_eq!(doc["resource"], "https://mcp.example/mcp");
        assert_eq!(doc["authorization_servers"][0], "https://as.example");
        assert_eq!(doc["scopes_supported"][0], "mcp:tools");
    }
}
