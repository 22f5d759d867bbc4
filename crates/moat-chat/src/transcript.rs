//! Transcripts: each conversation as JSON lines under the state directory
//! (`<state>/chat/<id>.jsonl`): a first line describing it, then one line per turn, written
//! as the turns happen, so a crash loses nothing said before it.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ChatError;
use crate::message::Turn;

/// One line of a transcript.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Start {
        id: String,
        created: String,
        provider: String,
        model: String,
    },
    Turn {
        turn: Turn,
    },
}

/// A transcript being written.
#[derive(Debug)]
pub struct Transcript {
    id: String,
    path: PathBuf,
    file: File,
}

/// The directory transcripts live in.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("chat")
}

impl Transcript {
    /// A new transcript in `dir`, named by the time and a random suffix.
    pub fn create(dir: &Path, provider: &str, model: &str) -> Result<Transcript, ChatError> {
        let now = jiff::Timestamp::now();
        let suffix: u16 = rand::random();
        let id = format!("{}-{suffix:04x}", now.strftime("%Y%m%d-%H%M%S"));
        let path = dir.join(format!("{id}.jsonl"));
        let io = |source| ChatError::Transcript {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        let mut t = Transcript {
            id: id.clone(),
            path,
            file,
        };
        t.write(&Line::Start {
            id,
            created: now.to_string(),
            provider: provider.to_owned(),
            model: model.to_owned(),
        })?;
        Ok(t)
    }

    /// Continues the transcript `id` (or the newest, for `None`), returning it and its turns.
    pub fn resume(dir: &Path, id: Option<&str>) -> Result<(Transcript, Vec<Turn>), ChatError> {
        let path = match id {
            Some(id) => {
                if id.contains('/') || id.contains("..") {
                    return Err(ChatError::Resume(format!("{id:?} is not a transcript id")));
                }
                dir.join(format!("{}.jsonl", id.trim_end_matches(".jsonl")))
            }
            None => newest(dir)?,
        };
        let io = |source| ChatError::Transcript {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ChatError::Resume(format!(
                    "no transcript {} (they are in {})",
                    path.display(),
                    dir.display()
                ))
            } else {
                io(e)
            }
        })?;
        let mut turns = Vec::new();
        for (n, line) in BufReader::new(file).lines().enumerate() {
            let line = line.map_err(io)?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Line>(&line) {
                Ok(Line::Turn { turn }) => turns.push(turn),
                Ok(Line::Start { .. }) => {}
                Err(e) => {
                    return Err(ChatError::Resume(format!(
                        "{}:{}: not a transcript line: {e}",
                        path.display(),
                        n + 1
                    )));
                }
            }
        }
        let file = OpenOptions::new().append(true).open(&path).map_err(io)?;
        let id = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok((Transcript { id, path, file }, turns))
    }

    /// Its id (what `--resume` takes).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one turn.
    pub fn append(&mut self, turn: &Turn) -> Result<(), ChatError> {
        self.write(&Line::Turn { turn: turn.clone() })
    }

    fn write(&mut self, line: &Line) -> Result<(), ChatError> {
        let mut text = serde_json::to_string(line).map_err(|e| ChatError::Transcript {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        text.push('\n');
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|source| ChatError::Transcript {
                path: self.path.clone(),
                source,
            })
    }
}

/// The most recently written transcript in `dir`.
fn newest(dir: &Path) -> Result<PathBuf, ChatError> {
    let none = || ChatError::Resume(format!("no transcripts to resume in {}", dir.display()));
    let entries = std::fs::read_dir(dir).map_err(|_| none())?;
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max()
        .map(|(_, p)| p)
        .ok_or_else(none)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_resumes_with_its_turns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut t = Transcript::create(dir.path(), "anthropic", "m").expect("create");
        let turns = vec![
            Turn::User { text: "hi".into() },
            Turn::Assistant {
                text: "hello".into(),
                tool_calls: vec![],
            },
        ];
        for turn in &turns {
            t.append(turn).expect("append");
        }
        let id = t.id().to_owned();
        drop(t);
        let (again, read) = Transcript::resume(dir.path(), Some(&id)).expect("resume");
        assert_eq!(read, turns);
        assert_eq!(again.id(), id);
        let (_, newest) = Transcript::resume(dir.path(), None).expect("newest");
        assert_eq!(newest, turns);
        assert!(Transcript::resume(dir.path(), Some("../x")).is_err());
        assert!(Transcript::resume(dir.path(), Some("nope")).is_err());
    }
}
