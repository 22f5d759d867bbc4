//! The names tools and prompts get towards the client: `server__tool`, or the server's
//! configured `prefix` and the tool's own name.
//!
//! Clients see one flat list, so by default every name says which server it came from. Many clients
//! reject tool names longer than 64 characters, so a longer name is cut and ends with a
//! short hash of the whole name: two long names that share a prefix stay apart, and the
//! same tool always gets the same name (pins and consent decisions are keyed by it).

use sha2::{Digest, Sha256};

/// The prefix of the `_meta` keys the protocol itself defines: they belong to one
/// connection, so the gateway never passes them from one side to the other.
pub(crate) const PROTOCOL_KEYS: &str = "io.modelcontextprotocol/";

/// Between the server's name and the tool's. Server names may not contain it, so the
/// first occurrence in an exposed name always ends the server's part.
pub const SEPARATOR: &str = "__";

/// The longest name a client is shown.
pub const MAX_NAME_LEN: usize = 64;

/// Hex digits of the hash that ends a shortened name.
const HASH_LEN: usize = 8;

/// `server__name`, shortened to [`MAX_NAME_LEN`] with a hash when longer.
pub fn exposed_name(server: &str, name: &str) -> String {
    prefixed_name(&format!("{server}{SEPARATOR}"), name)
}

/// `prefix` and `name` joined, shortened to [`MAX_NAME_LEN`] with a hash when longer.
pub fn prefixed_name(prefix: &str, name: &str) -> String {
    let full = format!("{prefix}{name}");
    if full.len() <= MAX_NAME_LEN {
        return full;
    }
    let digest = Sha256::digest(full.as_bytes());
    let hash: String = digest
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut cut = MAX_NAME_LEN - HASH_LEN - 1;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}_{hash}", &full[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_joined() {
        assert_eq!(exposed_name("fs", "read_file"), "fs__read_file");
    }

    #[test]
    fn long_names_are_capped_with_a_stable_hash() {
        let long = "a".repeat(80);
        let one = exposed_name("server", &format!("{long}_one"));
        let two = exposed_name("server", &format!("{long}_two"));
        assert_eq!(one.len(), MAX_NAME_LEN);
        assert_eq!(two.len(), MAX_NAME_LEN);
        assert_ne!(one, two, "a shared prefix must not make names collide");
        assert_eq!(one, exposed_name("server", &format!("{long}_one")));
        assert!(one.starts_with("server__aaaa"));
    }

    #[test]
    fn exactly_64_is_kept() {
        let name = "t".repeat(MAX_NAME_LEN - 4);
        assert_eq!(exposed_name("ab", &name), format!("ab__{name}"));
        assert_eq!(exposed_name("ab", &name).len(), MAX_NAME_LEN);
    }

    #[test]
    fn multibyte_names_are_cut_on_a_character_boundary() {
        let name = "é".repeat(60);
        let out = exposed_name("s", &name);
        assert!(out.len() <= MAX_NAME_LEN);
    }
}
