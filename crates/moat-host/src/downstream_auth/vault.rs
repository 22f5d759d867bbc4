//! Per-user downstream tokens at rest, encrypted: one record per (server, user), a file in
//! the state directory or, with a shared store, a row of `downstream_tokens` that every
//! replica reads ([`SharedTokens`]); ChaCha20-Poly1305 with a random nonce, and the record's
//! name (server, issuer, subject) as associated data, so a record put under another user's
//! name does not decrypt. The store sees only ciphertext.
//!
//! The key is 32 bytes: from the environment (64 hex digits) or a key file, which is made
//! (random, mode 0600) when missing and refused when others may read it. Replicas sharing a
//! store must share the key too (the same `key_env` or `key_file`).

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use moat_transport::http::oauth::{Secret, TokenSet, TokenType};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::user::UserKey;
use crate::store::SharedTokens;

/// Why the vault cannot be opened or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VaultError {
    /// The key is missing, malformed or too widely readable.
    #[error("the downstream token key: {0}")]
    Key(String),
    /// A file could not be read or written.
    #[error("the downstream token store at {path}: {why}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        why: String,
    },
}

/// The encrypted tokens of every user of every `oauth` server.
pub(crate) struct Vault {
    records: Records,
    key: LessSafeKey,
}

/// Where sealed records are kept.
enum Records {
    /// One file each, in this directory.
    Files(PathBuf),
    /// Rows of the shared store.
    Shared(SharedTokens),
}

#[derive(Serialize, Deserialize)]
struct Record {
    access_token: String,
    refresh_token: Option<String>,
    expires_at: Option<u64>,
    scopes: Vec<String>,
    resource: String,
    issuer: String,
}

impl Vault {
    /// The vault in `dir` with `key`: 64 hex digits (from the environment), else the key
    /// file at `key_file` (made if missing).
    pub(crate) fn open(
        dir: PathBuf,
        key: Option<&str>,
        key_file: &Path,
    ) -> Result<Vault, VaultError> {
        let key = vault_key(key, key_file)?;
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        Ok(Vault {
            records: Records::Files(dir),
            key,
        })
    }

    /// The vault in the shared store, sealed with `key` (64 hex digits) or the key file.
    pub(crate) fn open_shared(
        tokens: SharedTokens,
        key: Option<&str>,
        key_file: &Path,
    ) -> Result<Vault, VaultError> {
        Ok(Vault {
            records: Records::Shared(tokens),
            key: vault_key(key, key_file)?,
        })
    }

    fn read(&self, name: &str) -> Option<Vec<u8>> {
        match &self.records {
            Records::Files(dir) => std::fs::read(dir.join(format!("{name}.tok"))).ok(),
            Records::Shared(tokens) => match tokens.get(name) {
                Ok(found) => found,
                Err(e) => {
                    tracing::warn!(error = %e, "downstream tokens: reading the store failed");
                    None
                }
            },
        }
    }

    fn write(&self, name: &str, sealed: Vec<u8>) -> Result<(), VaultError> {
        let dir = match &self.records {
            Records::Files(dir) => dir,
            Records::Shared(tokens) => {
                return tokens.put(name, sealed).map_err(|why| VaultError::Io {
                    path: PathBuf::from(format!("{tokens:?}")),
                    why,
                });
            }
        };
        let path = dir.join(format!("{name}.tok"));
        // Written aside and renamed: a crash leaves the old record or the new, not half.
        let tmp = path.with_extension("tmp");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io(&tmp, e))?;
        file.write_all(&sealed).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))
    }
}

/// The sealing key: 64 hex digits given, else the key file's (made if missing).
fn vault_key(key: Option<&str>, key_file: &Path) -> Result<LessSafeKey, VaultError> {
    {
        let bytes = match key {
            Some(hex) => from_hex(hex.trim())
                .ok_or_else(|| VaultError::Key("it must be 64 hex digits (32 bytes)".into()))?,
            None => key_from_file(key_file)?,
        };
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .map_err(|_| VaultError::Key("it is not a ChaCha20-Poly1305 key".into()))?;
        Ok(LessSafeKey::new(unbound))
    }
}

impl Vault {
    /// `user`'s tokens for `server`, if kept (a record that does not decrypt is none).
    pub(crate) fn load(&self, server: &str, user: &UserKey) -> Option<TokenSet> {
        let (name, aad) = self.place(server, user);
        let mut data = self.read(&name)?;
        if data.len() < NONCE_LEN {
            return None;
        }
        let sealed = data.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&data).ok()?;
        let mut sealed = sealed;
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(aad.as_bytes()), &mut sealed)
            .ok()?;
        let record: Record = serde_json::from_slice(plain).ok()?;
        let mut tokens = TokenSet::bearer(
            Secret::new(record.access_token),
            record.resource,
            record.issuer,
        );
        tokens.refresh_token = record.refresh_token.map(Secret::new);
        tokens.expires_at = record
            .expires_at
            .map(|s| UNIX_EPOCH + Duration::from_secs(s));
        tokens.scopes = record.scopes;
        Some(tokens)
    }

    /// Keeps `tokens` as `user`'s for `server` (replacing what was kept). DPoP-bound tokens
    /// are not kept: their key lives in memory only.
    pub(crate) fn save(
        &self,
        server: &str,
        user: &UserKey,
        tokens: &TokenSet,
    ) -> Result<(), VaultError> {
        if tokens.token_type != TokenType::Bearer {
            return Ok(());
        }
        let record = Record {
            access_token: tokens.access_token.expose().to_owned(),
            refresh_token: tokens.refresh_token.as_ref().map(|s| s.expose().to_owned()),
            expires_at: tokens
                .expires_at
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_secs()),
            scopes: tokens.scopes.clone(),
            resource: tokens.resource.clone(),
            issuer: tokens.issuer.clone(),
        };
        let (name, aad) = self.place(server, user);
        let mut plain = serde_json::to_vec(&record).map_err(|e| VaultError::Io {
            path: PathBuf::from(&name),
            why: e.to_string(),
        })?;
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| VaultError::Key(e.to_string()))?;
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad.as_bytes()),
                &mut plain,
            )
            .map_err(|_| VaultError::Key("sealing failed".into()))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&plain);
        self.write(&name, out)
    }

    /// Forgets `user`'s tokens for `server`.
    pub(crate) fn clear(&self, server: &str, user: &UserKey) {
        let name = self.place(server, user).0;
        match &self.records {
            Records::Files(dir) => {
                let _ = std::fs::remove_file(dir.join(format!("{name}.tok")));
            }
            Records::Shared(tokens) => {
                if let Err(e) = tokens.delete(&name) {
                    tracing::warn!(error = %e, "downstream tokens: forgetting a record failed");
                }
            }
        }
    }

    /// The name of a record (a digest: it says nothing of whose it is) and its associated
    /// data.
    fn place(&self, server: &str, user: &UserKey) -> (String, String) {
        let aad = format!("{server}\n{}\n{}", user.issuer, user.subject);
        let name: String = Sha256::digest(aad.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        (name, aad)
    }
}

fn io(path: &Path, e: std::io::Error) -> VaultError {
    VaultError::Io {
        path: path.to_path_buf(),
        why: e.to_string(),
    }
}

fn from_hex(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The key in `path`, made (random, 0600) if there is none; refused if group or others may
/// read it.
fn key_from_file(path: &Path) -> Result<[u8; 32], VaultError> {
    match std::fs::metadata(path) {
        Ok(meta) => {
            if meta.permissions().mode() & 0o077 != 0 {
                return Err(VaultError::Key(format!(
                    "{} may be read by others (mode {:o}); chmod 600 it",
                    path.display(),
                    meta.permissions().mode() & 0o777
                )));
            }
            let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
            from_hex(text.trim()).ok_or_else(|| {
                VaultError::Key(format!("{} must hold 64 hex digits", path.display()))
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).map_err(|e| VaultError::Key(e.to_string()))?;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
            }
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| io(path, e))?;
            file.write_all(format!("{hex}\n").as_bytes())
                .map_err(|e| io(path, e))?;
            Ok(key)
        }
        Err(e) => Err(io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(access: &str) -> TokenSet {
        let mut t = TokenSet::bearer(Secret::new(access), "https://api/mcp", "https://idp");
        t.refresh_token = Some(Secret::new("refresh-1"));
        t.expires_at = Some(std::time::SystemTime::now() + Duration::from_secs(600));
        t
    }

    #[test]
    fn round_trip_per_user_and_encrypted() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path().join("v"), None, &dir.path().join("key")).unwrap();
        let (alice, bob) = (UserKey::new("i", "alice"), UserKey::new("i", "bob"));
        vault.save("api", &alice, &tokens("secret-access")).unwrap();
        let back = vault.load("api", &alice).unwrap();
        assert_eq!(back.access_token.expose(), "secret-access");
        assert_eq!(back.refresh_token.unwrap().expose(), "refresh-1");
        assert!(vault.load("api", &bob).is_none());
        assert!(vault.load("other", &alice).is_none());
        for entry in std::fs::read_dir(dir.path().join("v")).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            assert!(!String::from_utf8_lossy(&data).contains("secret-access"));
        }
        let mode = std::fs::metadata(dir.path().join("key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        vault.clear("api", &alice);
        assert!(vault.load("api", &alice).is_none());
    }

    /// Two gateways on one store with the same key: a user's tokens saved through one are
    /// there for the other; the row is ciphertext; another key opens nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicas_share_tokens_through_the_store() {
        let Some(store) = crate::store::postgres::TestStore::open("vault").await else {
            return;
        };
        let pg = store.pg.clone();
        let dir = tempfile::tempdir().unwrap();
        let unused = dir.path().join("no-key-file");
        let key = "ab".repeat(32);
        let open = move |key: &str| {
            Vault::open_shared(SharedTokens::start(pg.clone()), Some(key), &unused).unwrap()
        };
        let (a, b, stranger) = (open(&key), open(&key), open(&"cd".repeat(32)));
        let alice = UserKey::new("i", "alice");
        let (a, b, alice) = tokio::task::spawn_blocking(move || {
            a.save("api", &alice, &tokens("secret-access")).unwrap();
            let back = b.load("api", &alice).expect("the other gateway reads it");
            assert_eq!(back.access_token.expose(), "secret-access");
            assert!(
                stranger.load("api", &alice).is_none(),
                "another key opens nothing"
            );
            (a, b, alice)
        })
        .await
        .expect("vault ops");
        let rows = store
            .admin
            .query(
                &format!("SELECT sealed FROM {}.downstream_tokens", store.schema),
                &[],
            )
            .await
            .expect("rows");
        assert_eq!(rows.len(), 1);
        let sealed: Vec<u8> = rows[0].get(0);
        assert!(!String::from_utf8_lossy(&sealed).contains("secret-access"));
        tokio::task::spawn_blocking(move || {
            b.clear("api", &alice);
            assert!(a.load("api", &alice).is_none(), "cleared for both");
        })
        .await
        .expect("vault ops");
        store.close().await;
    }

    #[test]
    fn a_record_moved_to_another_user_does_not_open() {
        let dir = tempfile::tempdir().unwrap();
        let vault = Vault::open(dir.path().join("v"), None, &dir.path().join("key")).unwrap();
        let (alice, bob) = (UserKey::new("i", "alice"), UserKey::new("i", "bob"));
        vault.save("api", &alice, &tokens("a")).unwrap();
        vault.save("api", &bob, &tokens("b")).unwrap();
        let file = |user| {
            dir.path()
                .join("v")
                .join(format!("{}.tok", vault.place("api", user).0))
        };
        std::fs::copy(file(&alice), file(&bob)).unwrap();
        assert!(vault.load("api", &bob).is_none());
    }

    #[test]
    fn keys_from_env_and_refused_files() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Vault::open(dir.path().join("v"), Some("abc"), &dir.path().join("k")).is_err());
        let hex = "11".repeat(32);
        let v1 = Vault::open(dir.path().join("v"), Some(&hex), &dir.path().join("k")).unwrap();
        let user = UserKey::new("i", "u");
        v1.save("s", &user, &tokens("t")).unwrap();
        let other = "22".repeat(32);
        let v2 = Vault::open(dir.path().join("v"), Some(&other), &dir.path().join("k")).unwrap();
        assert!(v2.load("s", &user).is_none(), "another key opens nothing");
        let open = dir.path().join("open-key");
        std::fs::write(&open, &hex).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Vault::open(dir.path().join("v"), None, &open)
            .err()
            .unwrap();
        assert!(e.to_string().contains("chmod 600"), "{e}");
    }
}
