//! The gateway's audit signing key: an Ed25519 key made on first start when `[audit] sign`
//! is on, kept in the state directory as [`KEY_FILE_NAME`] (mode 0600, the 32-byte seed in
//! hex). `moat audit key` prints its public half, which `moat audit verify --key` trusts.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

pub use ed25519_dalek::{SigningKey, VerifyingKey};

use super::chain::{from_hex, to_hex};
use super::error::AuditError;

/// The key's file name inside the state directory.
pub const KEY_FILE_NAME: &str = "audit.key";

/// Where the signing key lives in `state_dir`.
pub fn key_path(state_dir: &Path) -> PathBuf {
    state_dir.join(KEY_FILE_NAME)
}

fn key_error(path: &Path, reason: impl std::fmt::Display) -> AuditError {
    AuditError::Key {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Reads the key at `path`, or makes one there (mode 0600) when there is none.
///
/// Two gateways starting at once end with the same key: the new key is written to a
/// private temporary file and linked into place only if no key appeared meanwhile.
pub fn load_or_create(path: &Path) -> Result<SigningKey, AuditError> {
    match load(path) {
        Err(AuditError::Key { .. }) if !path.exists() => {}
        other => return other,
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| AuditError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| key_error(path, format!("no randomness: {e}")))?;
    let tmp = path.with_extension(format!("key.{}.tmp", std::process::id()));
    let written = write_private(&tmp, &seed).and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match written {
        Ok(()) => {
            tracing::info!(path = %path.display(), "audit: made a signing key");
            Ok(SigningKey::from_bytes(&seed))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load(path),
        Err(e) => Err(key_error(path, e)),
    }
}

fn write_private(path: &Path, seed: &[u8; 32]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    writeln!(file, "{}", to_hex(seed))?;
    file.sync_all()
}

/// Reads the key at `path`; warns when others may read it.
pub fn load(path: &Path) -> Result<SigningKey, AuditError> {
    let text = std::fs::read_to_string(path).map_err(|e| key_error(path, e))?;
    let seed = from_hex::<32>(text.trim()).ok_or_else(|| {
        key_error(
            path,
            "not an audit key (64 hex digits); move it away to have a new one made",
        )
    })?;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(path = %path.display(), mode = format!("{:o}", meta.permissions().mode() & 0o777),
            "audit: the signing key is readable by others; chmod 600 it");
    }
    Ok(SigningKey::from_bytes(&seed))
}

/// The public half of the key at `path`.
pub fn public_key(path: &Path) -> Result<VerifyingKey, AuditError> {
    load(path).map(|k| k.verifying_key())
}

/// Parses a public key given as 64 hex digits (as `moat audit key` prints it).
pub fn parse_public_key(text: &str) -> Option<VerifyingKey> {
    from_hex::<32>(text.trim()).and_then(|b| VerifyingKey::from_bytes(&b).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_path(&dir.path().join("state"));
        let made = load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = load_or_create(&path).unwrap();
        assert_eq!(made.to_bytes(), again.to_bytes());
        let public = public_key(&path).unwrap();
        assert_eq!(
            parse_public_key(&to_hex(public.as_bytes())),
            Some(made.verifying_key())
        );
        // No temporary file is left behind.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );

        std::fs::write(&path, "garbage").unwrap();
        assert!(matches!(load_or_create(&path), Err(AuditError::Key { .. })));
    }
}
