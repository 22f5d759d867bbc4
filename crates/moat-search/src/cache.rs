//! The on-disk cache of tool embeddings, so the model runs only for definitions it has not
//! seen. One file per model (named by the model's fingerprint), holding one vector per
//! definition hash; a definition that changes gets a new hash and so a fresh embedding.
//!
//! Format (little-endian): magic `MOATEMB1`, text version u32, dim u32, count u32, then
//! `count` × (32-byte key, `dim` × f32), then the SHA-256 of everything before it. A file
//! that is short, long, of another version or dimension, or fails its checksum is ignored
//! (and rewritten), never trusted.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"MOATEMB1";

/// Vectors by definition hash.
pub type Vectors = HashMap<[u8; 32], Vec<f32>>;

/// The cache file for a model fingerprint inside `dir`.
pub fn path(dir: &Path, model_fingerprint: &[u8; 32]) -> PathBuf {
    let hex: String = model_fingerprint[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    dir.join(format!("embeddings-{hex}.bin"))
}

/// Reads the cache; `None` when the file is missing or not a valid cache of this
/// dimension and text version (the caller embeds everything and rewrites it).
pub fn load(file: &Path, dim: usize, text_version: u32) -> Option<Vectors> {
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "cannot read the embedding cache; rebuilding it");
            return None;
        }
    };
    let parsed = parse(&bytes, dim, text_version);
    if parsed.is_none() {
        tracing::warn!(file = %file.display(), "embedding cache is corrupt or stale; rebuilding it");
    }
    parsed
}

fn parse(bytes: &[u8], dim: usize, text_version: u32) -> Option<Vectors> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
    if Sha256::digest(body).as_slice() != sum {
        return None;
    }
    let header = body.get(..20)?;
    let u32_at = |i: usize| {
        header
            .get(i..i + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    };
    if &header[..8] != MAGIC || u32_at(8)? != text_version || u32_at(12)? as usize != dim {
        return None;
    }
    let count = u32_at(16)? as usize;
    let entry = 32 + dim * 4;
    let entries = &body[20..];
    if entries.len() != count.checked_mul(entry)? {
        return None;
    }
    let mut out = HashMap::with_capacity(count);
    for e in entries.chunks_exact(entry) {
        let key: [u8; 32] = e[..32].try_into().ok()?;
        let v = e[32..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.insert(key, v);
    }
    Some(out)
}

/// Writes the cache atomically (a temporary file renamed over the old one), so a crash or
/// a concurrent reader never sees half a file. Failure is logged, not returned: the cache
/// only saves time.
pub fn store(file: &Path, dim: usize, text_version: u32, vectors: &Vectors) {
    if let Err(e) = try_store(file, dim, text_version, vectors) {
        tracing::warn!(file = %file.display(), error = %e, "cannot write the embedding cache");
    }
}

fn try_store(file: &Path, dim: usize, text_version: u32, vectors: &Vectors) -> std::io::Result<()> {
    let mut body = Vec::with_capacity(20 + vectors.len() * (32 + dim * 4) + 32);
    body.extend_from_slice(MAGIC);
    body.extend_from_slice(&text_version.to_le_bytes());
    body.extend_from_slice(&(dim as u32).to_le_bytes());
    let mut keys: Vec<&[u8; 32]> = vectors
        .keys()
        .filter(|k| vectors[*k].len() == dim)
        .collect();
    // Sorted so equal contents give equal files.
    keys.sort();
    body.extend_from_slice(&(keys.len() as u32).to_le_bytes());
    for k in keys {
        body.extend_from_slice(k);
        for x in &vectors[k] {
            body.extend_from_slice(&x.to_le_bytes());
        }
    }
    let sum = Sha256::digest(&body);
    body.extend_from_slice(&sum);
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        file.file_name().and_then(|n| n.to_str()).unwrap_or("cache"),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vectors {
        HashMap::from([
            ([1u8; 32], vec![0.5, -1.0, 2.0]),
            ([2u8; 32], vec![0.0, 0.25, 3.5]),
        ])
    }

    #[test]
    fn round_trip() {
        let t = tempfile::tempdir().expect("tempdir");
        let f = path(t.path(), &[7u8; 32]);
        assert!(f.ends_with("embeddings-0707070707070707.bin"));
        assert_eq!(load(&f, 3, 1), None, "missing file");
        store(&f, 3, 1, &sample());
        assert_eq!(load(&f, 3, 1), Some(sample()));
        assert_eq!(load(&f, 4, 1), None, "other dimension");
        assert_eq!(load(&f, 3, 2), None, "other text version");
    }

    #[test]
    fn corruption_is_detected() {
        let t = tempfile::tempdir().expect("tempdir");
        let f = t.path().join("c.bin");
        store(&f, 3, 1, &sample());
        let good = std::fs::read(&f).expect("read");
        for bad in [
            {
                let mut b = good.clone();
                b[40] ^= 1;
                b
            },
            good[..good.len() - 1].to_vec(),
            good[..10].to_vec(),
            Vec::new(),
            b"garbage".to_vec(),
        ] {
            std::fs::write(&f, &bad).expect("write");
            assert_eq!(load(&f, 3, 1), None);
        }
    }

    #[test]
    fn store_into_missing_dir_and_unwritable_place() {
        let t = tempfile::tempdir().expect("tempdir");
        let f = t.path().join("a/b/c.bin");
        store(&f, 3, 1, &sample());
        assert_eq!(load(&f, 3, 1), Some(sample()));
        // A path under a regular file cannot be created: logged, not a panic.
        store(&f.join("x.bin"), 3, 1, &sample());
    }
}
