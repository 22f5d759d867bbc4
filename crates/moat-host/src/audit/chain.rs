//! The audit hash chain, independent of any storage engine: the canonical byte encoding of a
//! record, its hash, the signed chain heads ("checkpoints"), and the verifier.
//!
//! A store (SQLite today, another engine later) keeps for each record the hash of the record
//! before it (`prev_hash`) and its own `hash`; it hands its records to a [`Verifier`] in id
//! order and its checkpoints to [`Verifier::new`]. Nothing here knows SQL.
//!
//! # Canonical encoding, version 1
//!
//! A record's hash is SHA-256 over these bytes, in this order (integers big-endian, two's
//! complement; a *text* is its UTF-8 length as 8 bytes then its bytes; an *optional text* is
//! one byte 0 when absent, else one byte 1 then the text):
//!
//! | field          | encoding                                  |
//! |----------------|-------------------------------------------|
//! | domain tag     | the 20 ASCII bytes `moat-audit-record-v1` |
//! | `prev_hash`    | 32 bytes (the previous record's hash)     |
//! | `id`           | 8 bytes (the record's sequence number)    |
//! | `time_ms`      | 8 bytes                                   |
//! | `kind`         | text                                      |
//! | `session`      | text                                      |
//! | `client`       | optional text                             |
//! | `server`       | text                                      |
//! | `tool`         | text                                      |
//! | `exposed_name` | text                                      |
//! | `args_digest`  | text                                      |
//! | `arguments`    | optional text (the JSON text as stored)   |
//! | `decision`     | text                                      |
//! | `rule`         | text                                      |
//! | `consent`      | optional text                             |
//! | `outcome`      | text                                      |
//! | `duration_us`  | 8 bytes                                   |
//! | `result_bytes` | 8 bytes                                   |
//! | `error`        | optional text                             |
//!
//! Every field is length-prefixed, so two different records never encode alike; a record
//! with a new field will be a new version with a new tag. Values are hashed as stored (the
//! arguments' JSON text, sizes clamped to `i64`), so a verifier never re-serialises anything.
//!
//! # The chain
//!
//! Ids are consecutive: the writer gives each record the id after the newest one, in the same
//! write transaction that reads that record's hash. The first chained record follows the
//! records written before chaining existed (the *legacy prefix*, which has no hashes): its
//! `prev_hash` is the hash those records would have had, chained from [`GENESIS`] (32 zero
//! bytes); with no legacy records, the chain starts at id 1 from [`GENESIS`] itself. Changing a legacy record after that
//! breaks the chain at the first chained record.
//!
//! # Signed heads
//!
//! A checkpoint signs (Ed25519) the bytes `moat-audit-head-v1` (18 ASCII bytes), the id of
//! the newest record (8 bytes), its hash (32 bytes) and the checkpoint's time in unix
//! milliseconds (8 bytes). Verifying checks each signature with the trusted key and that the
//! named record exists with that very hash, so records cannot be rewritten, re-hashed or cut
//! from the end up to a signed head without the key.

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::record::AuditRecord;

/// A SHA-256 hash.
pub type Hash = [u8; 32];

/// The `prev_hash` of the first record of a chain with no legacy prefix.
pub const GENESIS: Hash = [0; 32];

const RECORD_TAG: &[u8] = b"moat-audit-record-v1";
const HEAD_TAG: &[u8] = b"moat-audit-head-v1";
const CALLER_TAG: &[u8] = b"caller";

/// A record as a store keeps it: every field the hash covers, in its stored form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredRecord {
    /// The sequence number (consecutive from the first chained record).
    pub id: i64,
    /// Unix milliseconds (see [`AuditRecord`] for every field).
    pub time_ms: i64,
    /// What is recorded (`call`, `sampling`, …).
    pub kind: String,
    /// The upstream session.
    pub session: String,
    /// The client's name and version.
    pub client: Option<String>,
    /// The caller's user (records written before users were recorded have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The caller's OAuth client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The server's configured name.
    pub server: String,
    /// The tool (or method).
    pub tool: String,
    /// The name the client saw.
    pub exposed_name: String,
    /// SHA-256 hex of the redacted arguments.
    pub args_digest: String,
    /// The (redacted) arguments as the JSON text stored, not re-serialised.
    pub arguments: Option<String>,
    /// `allow`, `ask`, `deny` or `error`.
    pub decision: String,
    /// Which rule decided.
    pub rule: String,
    /// How consent went.
    pub consent: Option<String>,
    /// How the call ended.
    pub outcome: String,
    /// Microseconds, clamped to `i64`.
    pub duration_us: i64,
    /// Result size, clamped to `i64`.
    pub result_bytes: i64,
    /// What went wrong.
    pub error: Option<String>,
}

impl StoredRecord {
    /// The stored form of `record` with sequence number `id` (an empty kind is stored as `call`).
    pub fn from_record(id: i64, r: &AuditRecord) -> StoredRecord {
        StoredRecord {
            id,
            time_ms: r.time_ms,
            kind: if r.kind.is_empty() {
                "call".to_owned()
            } else {
                r.kind.clone()
            },
            session: r.session.clone(),
            client: r.client.clone(),
            subject: r.subject.clone(),
            client_id: r.client_id.clone(),
            server: r.server.clone(),
            tool: r.tool.clone(),
            exposed_name: r.exposed_name.clone(),
            args_digest: r.args_digest.clone(),
            arguments: r.arguments.as_ref().map(|v| v.to_string()),
            decision: r.decision.clone(),
            rule: r.rule.clone(),
            consent: r.consent.clone(),
            outcome: r.outcome.clone(),
            duration_us: i64::try_from(r.duration_us).unwrap_or(i64::MAX),
            result_bytes: i64::try_from(r.result_bytes).unwrap_or(i64::MAX),
            error: r.error.clone(),
        }
    }

    /// The canonical encoding (version 1, see the module docs) of this record after `prev`.
    pub fn canonical_bytes(&self, prev: &Hash) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + self.arguments.as_ref().map_or(0, String::len));
        out.extend_from_slice(RECORD_TAG);
        out.extend_from_slice(prev);
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(&self.time_ms.to_be_bytes());
        text(&mut out, &self.kind);
        text(&mut out, &self.session);
        optional(&mut out, self.client.as_deref());
        text(&mut out, &self.server);
        text(&mut out, &self.tool);
        text(&mut out, &self.exposed_name);
        text(&mut out, &self.args_digest);
        optional(&mut out, self.arguments.as_deref());
        text(&mut out, &self.decision);
        text(&mut out, &self.rule);
        optional(&mut out, self.consent.as_deref());
        text(&mut out, &self.outcome);
        out.extend_from_slice(&self.duration_us.to_be_bytes());
        out.extend_from_slice(&self.result_bytes.to_be_bytes());
        optional(&mut out, self.error.as_deref());
        // Who called, after the rest, and only when known: a record without a caller
        // encodes as records did before callers were recorded, so those still verify.
        if self.subject.is_some() || self.client_id.is_some() {
            out.extend_from_slice(CALLER_TAG);
            optional(&mut out, self.subject.as_deref());
            optional(&mut out, self.client_id.as_deref());
        }
        out
    }

    /// This record's hash when it follows a record whose hash is `prev`.
    pub fn hash(&self, prev: &Hash) -> Hash {
        Sha256::digest(self.canonical_bytes(prev)).into()
    }
}

fn text(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn optional(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            text(out, s);
        }
    }
}

/// A record with its place in the chain; `None` links for a legacy record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainEntry {
    /// The record.
    pub record: StoredRecord,
    /// The previous record's hash, as stored.
    pub prev_hash: Option<Hash>,
    /// This record's hash, as stored.
    pub hash: Option<Hash>,
}

/// A signed chain head, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The checkpoint's own sequence number.
    pub id: i64,
    /// The newest record when it was signed.
    pub record_id: i64,
    /// That record's hash.
    pub head: Hash,
    /// When it was signed, unix milliseconds.
    pub time_ms: i64,
    /// The public key that signed it.
    pub public_key: [u8; 32],
    /// The Ed25519 signature over [`Checkpoint::message`].
    pub signature: [u8; 64],
}

impl Checkpoint {
    /// The bytes a checkpoint's signature covers (see the module docs).
    pub fn message(record_id: i64, head: &Hash, time_ms: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD_TAG.len() + 48);
        out.extend_from_slice(HEAD_TAG);
        out.extend_from_slice(&record_id.to_be_bytes());
        out.extend_from_slice(head);
        out.extend_from_slice(&time_ms.to_be_bytes());
        out
    }

    /// Signs the head `(record_id, head)` at `time_ms`; `id` is left 0 for the store to set.
    pub fn sign(key: &SigningKey, record_id: i64, head: Hash, time_ms: i64) -> Checkpoint {
        let signature = key.sign(&Checkpoint::message(record_id, &head, time_ms));
        Checkpoint {
            id: 0,
            record_id,
            head,
            time_ms,
            public_key: key.verifying_key().to_bytes(),
            signature: signature.to_bytes(),
        }
    }

    /// Whether the signature is valid for the stored head under `key`.
    pub fn signature_valid(&self, key: &VerifyingKey) -> bool {
        let message = Checkpoint::message(self.record_id, &self.head, self.time_ms);
        key.verify_strict(&message, &Signature::from_bytes(&self.signature))
            .is_ok()
    }
}

/// The first thing wrong with a chain, naming the record (or checkpoint) where it shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "problem", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Break {
    /// A stored hash or link is not 64 hex digits.
    #[error("record {id}: its {what} is not a SHA-256 hash")]
    Malformed {
        /// The record.
        id: i64,
        /// Which column.
        what: &'static str,
    },
    /// Records between two consecutive ids are gone.
    #[error("record {missing} is missing (deleted): record {id} follows record {prev_id} directly")]
    Missing {
        /// The first missing id.
        missing: i64,
        /// The record after the gap.
        id: i64,
        /// The record before the gap.
        prev_id: i64,
    },
    /// The store's first records are gone (a chain with no legacy prefix starts at id 1).
    #[error("records before record {id} are missing (deleted from the start of the trail)")]
    MissingStart {
        /// The first record left.
        id: i64,
    },
    /// A record has no hash after the chain started (written by something other than a
    /// chaining moat).
    #[error(
        "record {id} has no hash but comes after chained records (inserted by hand, or by an older moat)"
    )]
    Unchained {
        /// The record.
        id: i64,
    },
    /// A record's `prev_hash` is not the hash of the record before it.
    #[error(
        "record {id} does not follow record {prev_id} (a record was inserted, deleted or moved here, or record {prev_id} was rewritten)"
    )]
    Unlinked {
        /// The record.
        id: i64,
        /// The record before it.
        prev_id: i64,
    },
    /// The first chained record does not follow the legacy prefix.
    #[error(
        "record {id} does not follow the {legacy} record(s) written before the chain (one of them was changed, deleted or added)"
    )]
    LegacyChanged {
        /// The first chained record.
        id: i64,
        /// How many legacy records there are now.
        legacy: u64,
    },
    /// A record's contents do not match its hash.
    #[error("record {id} was altered: its contents do not match its hash")]
    Altered {
        /// The record.
        id: i64,
    },
    /// A checkpoint's signature does not verify.
    #[error(
        "the signed head at record {record_id} (checkpoint {checkpoint}) has an invalid signature"
    )]
    BadSignature {
        /// The checkpoint.
        checkpoint: i64,
        /// The record it signs.
        record_id: i64,
    },
    /// A checkpoint was signed by a key that is not trusted.
    #[error(
        "the signed head at record {record_id} (checkpoint {checkpoint}) is signed by an unknown key {public_key}"
    )]
    UnknownKey {
        /// The checkpoint.
        checkpoint: i64,
        /// The record it signs.
        record_id: i64,
        /// The key it names, hex.
        public_key: String,
    },
    /// The record a checkpoint signed is not the one stored.
    #[error("record {record_id} differs from the head signed at checkpoint {checkpoint}")]
    HeadChanged {
        /// The checkpoint.
        checkpoint: i64,
        /// The record.
        record_id: i64,
    },
    /// The record a checkpoint signed is gone.
    #[error(
        "record {record_id}, signed at checkpoint {checkpoint}, is missing (records were deleted from the end)"
    )]
    HeadMissing {
        /// The checkpoint.
        checkpoint: i64,
        /// The record.
        record_id: i64,
    },
}

impl Break {
    /// The record where the break shows.
    pub fn record_id(&self) -> i64 {
        match self {
            Break::Malformed { id, .. }
            | Break::Unchained { id }
            | Break::MissingStart { id }
            | Break::Unlinked { id, .. }
            | Break::LegacyChanged { id, .. }
            | Break::Altered { id } => *id,
            Break::Missing { missing, .. } => *missing,
            Break::BadSignature { record_id, .. }
            | Break::UnknownKey { record_id, .. }
            | Break::HeadChanged { record_id, .. }
            | Break::HeadMissing { record_id, .. } => *record_id,
        }
    }
}

/// What verifying found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// Records written before chaining existed, at the start of the store.
    pub legacy: u64,
    /// Chained records checked.
    pub chained: u64,
    /// The first chained record's id.
    pub first_chained: Option<i64>,
    /// The newest record's id and hash (hex), when the chain has one.
    pub head: Option<Head>,
    /// Signed heads whose signature and record were checked.
    pub checkpoints: u64,
    /// The newest record covered by a valid signed head.
    pub signed_through: Option<i64>,
    /// Whether the checkpoints' key was given as trusted (else they were checked against the
    /// key they name, which finds an altered signature but not a re-signed chain).
    pub key_trusted: bool,
    /// For an export written with `--after`: the record it continues from, whose hash is
    /// taken from the export's first record as given.
    pub anchored_after: Option<i64>,
    /// The first thing wrong; `None` when the chain is intact.
    pub problem: Option<Break>,
}

impl Report {
    /// Whether the chain is intact.
    pub fn ok(&self) -> bool {
        self.problem.is_none()
    }
}

/// The chain's newest record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Head {
    /// Its id.
    pub id: i64,
    /// Its hash, hex.
    pub hash: String,
}

/// Checks a chain record by record, in id order, then its checkpoints ([`Verifier::finish`]).
#[derive(Debug)]
pub struct Verifier {
    report: Report,
    trusted: Vec<VerifyingKey>,
    /// Checkpoints by the record they sign, in order.
    checkpoints: Vec<Checkpoint>,
    next_checkpoint: usize,
    /// The hash the next legacy record would chain from (the legacy prefix so far).
    legacy_head: Hash,
    /// The newest record seen: its id and, once chained, its hash.
    prev: Option<(i64, Option<Hash>)>,
}

impl Verifier {
    /// A verifier for a store with these checkpoints. `trusted`: the keys allowed to sign
    /// them; when empty, each checkpoint is checked against the key it names.
    pub fn new(mut checkpoints: Vec<Checkpoint>, trusted: Vec<VerifyingKey>) -> Verifier {
        checkpoints.sort_by_key(|c| (c.record_id, c.id));
        Verifier {
            report: Report {
                key_trusted: !trusted.is_empty(),
                ..Report::default()
            },
            trusted,
            checkpoints,
            next_checkpoint: 0,
            legacy_head: GENESIS,
            prev: None,
        }
    }

    /// Checks the next record. Once a break is found, later records are not checked.
    pub fn push(&mut self, entry: &ChainEntry) {
        if self.report.problem.is_some() {
            return;
        }
        if let Err(problem) = self.check(entry) {
            self.report.problem = Some(problem);
        }
    }

    /// Records a break the store found itself (a value it could not read as moat writes it).
    pub fn fail(&mut self, problem: Break) {
        self.report.problem.get_or_insert(problem);
    }

    /// Whether a break was found (later records need not be read).
    pub fn failed(&self) -> bool {
        self.report.problem.is_some()
    }

    fn check(&mut self, entry: &ChainEntry) -> Result<(), Break> {
        let id = entry.record.id;
        let Some(hash) = entry.hash else {
            // Legacy records come only before the chain: they have no links to check.
            if self.report.chained > 0 {
                return Err(Break::Unchained { id });
            }
            self.legacy_head = entry.record.hash(&self.legacy_head);
            self.report.legacy += 1;
            self.prev = Some((id, None));
            return Ok(());
        };
        let prev_hash = entry.prev_hash.ok_or(Break::Malformed {
            id,
            what: "prev_hash",
        })?;
        match self.prev {
            Some((prev_id, prev)) => {
                if id != prev_id + 1 {
                    return Err(Break::Missing {
                        missing: prev_id + 1,
                        id,
                        prev_id,
                    });
                }
                match prev {
                    Some(prev) if prev != prev_hash => {
                        return Err(Break::Unlinked { id, prev_id });
                    }
                    None if prev_hash != self.legacy_head => {
                        return Err(Break::LegacyChanged {
                            id,
                            legacy: self.report.legacy,
                        });
                    }
                    _ => {}
                }
            }
            // The first record of the store claims a predecessor: the ones before it are gone.
            None if id != 1 => return Err(Break::MissingStart { id }),
            None if prev_hash != GENESIS => {
                return Err(Break::LegacyChanged { id, legacy: 0 });
            }
            None => {}
        }
        if entry.record.hash(&prev_hash) != hash {
            return Err(Break::Altered { id });
        }
        self.report.chained += 1;
        self.report.first_chained.get_or_insert(id);
        self.report.head = Some(Head {
            id,
            hash: to_hex(&hash),
        });
        self.prev = Some((id, Some(hash)));
        self.check_checkpoints(id, &hash)
    }

    /// Checks the checkpoints that sign record `id` (and any naming a record skipped before it).
    fn check_checkpoints(&mut self, id: i64, hash: &Hash) -> Result<(), Break> {
        while let Some(c) = self.checkpoints.get(self.next_checkpoint) {
            if c.record_id > id {
                break;
            }
            self.next_checkpoint += 1;
            if c.record_id < id || c.head != *hash {
                // A checkpoint naming a record that is not in the chain (gone, or legacy).
                return Err(Break::HeadChanged {
                    checkpoint: c.id,
                    record_id: c.record_id,
                });
            }
            self.check_signature(c)?;
            self.report.checkpoints += 1;
            self.report.signed_through = Some(id);
        }
        Ok(())
    }

    fn check_signature(&self, c: &Checkpoint) -> Result<(), Break> {
        let named = VerifyingKey::from_bytes(&c.public_key).ok();
        let key = if self.trusted.is_empty() {
            named
        } else {
            let trusted = self
                .trusted
                .iter()
                .find(|k| k.to_bytes() == c.public_key)
                .copied();
            if trusted.is_none() {
                return Err(Break::UnknownKey {
                    checkpoint: c.id,
                    record_id: c.record_id,
                    public_key: to_hex(&c.public_key),
                });
            }
            trusted
        };
        match key {
            Some(key) if c.signature_valid(&key) => Ok(()),
            _ => Err(Break::BadSignature {
                checkpoint: c.id,
                record_id: c.record_id,
            }),
        }
    }

    /// Ends the walk: checkpoints naming records past the last one are reported.
    pub fn finish(mut self) -> Report {
        if self.report.problem.is_none()
            && let Some(c) = self.checkpoints.get(self.next_checkpoint)
        {
            self.report.problem = Some(Break::HeadMissing {
                checkpoint: c.id,
                record_id: c.record_id,
            });
        }
        self.report
    }
}

/// One line of `moat audit export` (JSON Lines): a record with its links (hex, `null` for a
/// legacy record), or a signed head. Every value is as stored, so an external verifier can
/// recompute each hash from the line alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
// Lines are made and written one at a time, never held in bulk: boxing buys nothing.
#[allow(clippy::large_enum_variant)]
pub enum ExportLine {
    /// A record.
    Record {
        /// The record's fields, `arguments` as the JSON text stored.
        #[serde(flatten)]
        record: StoredRecord,
        /// The previous record's hash, hex.
        prev_hash: Option<String>,
        /// This record's hash, hex.
        hash: Option<String>,
    },
    /// A signed head.
    Checkpoint {
        /// The checkpoint's id.
        id: i64,
        /// The record it signs.
        record_id: i64,
        /// That record's hash, hex.
        head: String,
        /// When it was signed, unix milliseconds.
        time_ms: i64,
        /// The signer's public key, hex.
        public_key: String,
        /// The signature, hex.
        signature: String,
    },
}

impl From<&Checkpoint> for ExportLine {
    fn from(c: &Checkpoint) -> ExportLine {
        ExportLine::Checkpoint {
            id: c.id,
            record_id: c.record_id,
            head: to_hex(&c.head),
            time_ms: c.time_ms,
            public_key: to_hex(&c.public_key),
            signature: to_hex(&c.signature),
        }
    }
}

/// Verifies an export (`moat audit export` lines, in their order). An export that starts
/// after record 1 (`--after`) is taken from its first record's `prev_hash` on, which it
/// cannot check: [`Report::anchored_after`] says so.
pub fn verify_export(lines: &[ExportLine], trusted: Vec<VerifyingKey>) -> Report {
    let checkpoints = lines
        .iter()
        .filter_map(|line| match line {
            ExportLine::Checkpoint {
                id,
                record_id,
                head,
                time_ms,
                public_key,
                signature,
            } => Some(Checkpoint {
                id: *id,
                record_id: *record_id,
                // Kept zeroed when they do not parse: reported, never skipped.
                head: from_hex(head).unwrap_or([0; 32]),
                time_ms: *time_ms,
                public_key: from_hex(public_key).unwrap_or([0; 32]),
                signature: from_hex(signature).unwrap_or([0; 64]),
            }),
            ExportLine::Record { .. } => None,
        })
        .collect();
    let mut verifier = Verifier::new(checkpoints, trusted);
    for line in lines {
        let ExportLine::Record {
            record,
            prev_hash,
            hash,
        } = line
        else {
            continue;
        };
        let link = |text: &Option<String>, what| match text {
            None => Ok(None),
            Some(t) => from_hex(t).map(Some).ok_or(Break::Malformed {
                id: record.id,
                what,
            }),
        };
        let entry = link(prev_hash, "prev_hash").and_then(|prev_hash| {
            Ok(ChainEntry {
                record: record.clone(),
                prev_hash,
                hash: link(hash, "hash")?,
            })
        });
        match entry {
            Ok(entry) => {
                if verifier.prev.is_none()
                    && entry.record.id > 1
                    && let Some(prev) = entry.prev_hash
                {
                    verifier.prev = Some((entry.record.id - 1, Some(prev)));
                    verifier.report.anchored_after = Some(entry.record.id - 1);
                }
                verifier.push(&entry);
            }
            Err(problem) => verifier.fail(problem),
        }
        if verifier.failed() {
            break;
        }
    }
    verifier.finish()
}

/// The hash the next record of a chain follows, given the store's newest record (`None`:
/// an empty store) and, when that record has no hash, the legacy records (all of them, in
/// id order) to chain from [`GENESIS`].
pub fn legacy_head<'a>(legacy: impl IntoIterator<Item = &'a StoredRecord>) -> Hash {
    legacy
        .into_iter()
        .fold(GENESIS, |prev, record| record.hash(&prev))
}

/// Lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// Parses hex (either case) into exactly `N` bytes.
pub fn from_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = text.as_bytes();
    if bytes.len() != N * 2 {
        return None;
    }
    let digit = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let mut out = [0u8; N];
    for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *o = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: i64) -> StoredRecord {
        StoredRecord {
            id,
            time_ms: 1000 + id,
            kind: "call".into(),
            session: "s".into(),
            server: "fs".into(),
            tool: "read".into(),
            exposed_name: "fs__read".into(),
            args_digest: "d".into(),
            decision: "allow".into(),
            rule: "default".into(),
            outcome: "ok".into(),
            ..StoredRecord::default()
        }
    }

    fn chain(ids: std::ops::RangeInclusive<i64>, prev: Hash) -> Vec<ChainEntry> {
        let mut prev = prev;
        ids.map(|id| {
            let record = record(id);
            let hash = record.hash(&prev);
            let entry = ChainEntry {
                record,
                prev_hash: Some(prev),
                hash: Some(hash),
            };
            prev = hash;
            entry
        })
        .collect()
    }

    fn verify(entries: &[ChainEntry], checkpoints: Vec<Checkpoint>) -> Report {
        let mut v = Verifier::new(checkpoints, Vec::new());
        entries.iter().for_each(|e| v.push(e));
        v.finish()
    }

    #[test]
    fn every_field_is_covered_and_none_differs_from_empty() {
        let base = record(1);
        let h = base.hash(&GENESIS);
        let variants = [
            StoredRecord {
                id: 2,
                ..base.clone()
            },
            StoredRecord {
                time_ms: 0,
                ..base.clone()
            },
            StoredRecord {
                kind: "sampling".into(),
                ..base.clone()
            },
            StoredRecord {
                session: "t".into(),
                ..base.clone()
            },
            StoredRecord {
                client: Some(String::new()),
                ..base.clone()
            },
            StoredRecord {
                server: "fs2".into(),
                ..base.clone()
            },
            StoredRecord {
                tool: "read2".into(),
                ..base.clone()
            },
            StoredRecord {
                exposed_name: "x".into(),
                ..base.clone()
            },
            StoredRecord {
                args_digest: "e".into(),
                ..base.clone()
            },
            StoredRecord {
                arguments: Some("{}".into()),
                ..base.clone()
            },
            StoredRecord {
                decision: "deny".into(),
                ..base.clone()
            },
            StoredRecord {
                rule: "rule 1".into(),
                ..base.clone()
            },
            StoredRecord {
                consent: Some("yes".into()),
                ..base.clone()
            },
            StoredRecord {
                outcome: "failed".into(),
                ..base.clone()
            },
            StoredRecord {
                duration_us: 1,
                ..base.clone()
            },
            StoredRecord {
                result_bytes: 1,
                ..base.clone()
            },
            StoredRecord {
                error: Some(String::new()),
                ..base.clone()
            },
        ];
        for v in &variants {
            assert_ne!(v.hash(&GENESIS), h, "{v:?}");
        }
        assert_ne!(base.hash(&[1; 32]), h);
        // Length prefixes: moving bytes between adjacent fields changes the hash.
        let a = StoredRecord {
            server: "fs".into(),
            tool: "xread".into(),
            ..base.clone()
        };
        let b = StoredRecord {
            server: "fsx".into(),
            tool: "read".into(),
            ..base.clone()
        };
        assert_ne!(a.hash(&GENESIS), b.hash(&GENESIS));
    }

    #[test]
    fn known_answer_pins_the_encoding() {
        // Changing the encoding breaks every stored chain: this value must never change. It
        // was computed independently from the documented encoding (a few lines of Python).
        let bytes = record(1).canonical_bytes(&GENESIS);
        assert_eq!(&bytes[..20], b"moat-audit-record-v1");
        assert_eq!(
            to_hex(&record(1).hash(&GENESIS)),
            "104a83abcff813c0eb9aa6f63c9a29de36daf8a2a73c357d1c2196d25641a62f"
        );
    }

    #[test]
    fn intact_chain_with_legacy_prefix() {
        let legacy: Vec<ChainEntry> = (1..=3)
            .map(|id| ChainEntry {
                record: record(id),
                prev_hash: None,
                hash: None,
            })
            .collect();
        let anchor = legacy_head(legacy.iter().map(|e| &e.record));
        let mut all = legacy.clone();
        all.extend(chain(4..=10, anchor));
        let report = verify(&all, Vec::new());
        assert!(report.ok(), "{report:?}");
        assert_eq!(
            (report.legacy, report.chained, report.first_chained),
            (3, 7, Some(4))
        );

        // A legacy record changed after chaining started shows at the first chained record.
        all[1].record.tool = "write".into();
        let report = verify(&all, Vec::new());
        assert_eq!(
            report.problem,
            Some(Break::LegacyChanged { id: 4, legacy: 3 })
        );
    }

    #[test]
    fn breaks_name_the_record() {
        let good = chain(1..=6, GENESIS);
        let mut altered = good.clone();
        altered[2].record.decision = "deny".into();
        assert_eq!(
            verify(&altered, vec![]).problem,
            Some(Break::Altered { id: 3 })
        );

        let mut deleted = good.clone();
        deleted.remove(2);
        assert_eq!(
            verify(&deleted, vec![]).problem.map(|b| b.record_id()),
            Some(3)
        );

        let mut swapped = good.clone();
        swapped.swap(2, 3);
        (swapped[2].record.id, swapped[3].record.id) = (3, 4);
        assert_eq!(
            verify(&swapped, vec![]).problem,
            Some(Break::Unlinked { id: 3, prev_id: 2 })
        );

        assert_eq!(
            verify(&good[2..], vec![]).problem,
            Some(Break::MissingStart { id: 3 })
        );

        let mut unchained = good.clone();
        unchained[4].hash = None;
        assert_eq!(
            verify(&unchained, vec![]).problem,
            Some(Break::Unchained { id: 5 })
        );
    }

    #[test]
    fn checkpoints_detect_altered_signatures_and_cut_tails() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let entries = chain(1..=5, GENESIS);
        let head = entries[3].hash.unwrap();
        let mut cp = Checkpoint::sign(&key, 4, head, 99);
        cp.id = 1;
        let report = verify(&entries, vec![cp.clone()]);
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.signed_through, Some(4));

        let mut bad = cp.clone();
        bad.signature[10] ^= 1;
        assert_eq!(
            verify(&entries, vec![bad]).problem,
            Some(Break::BadSignature {
                checkpoint: 1,
                record_id: 4
            })
        );
        assert_eq!(
            verify(&entries[..3], vec![cp.clone()]).problem,
            Some(Break::HeadMissing {
                checkpoint: 1,
                record_id: 4
            })
        );
        // A trusted key that is not the signer's.
        let other = SigningKey::from_bytes(&[8; 32]).verifying_key();
        let mut v = Verifier::new(vec![cp], vec![other]);
        entries.iter().for_each(|e| v.push(e));
        assert!(matches!(
            v.finish().problem,
            Some(Break::UnknownKey { record_id: 4, .. })
        ));
    }

    #[test]
    fn exports_verify_whole_or_from_where_they_start() {
        let key = SigningKey::from_bytes(&[5; 32]);
        let entries = chain(1..=6, GENESIS);
        let mut cp = Checkpoint::sign(&key, 6, entries[5].hash.unwrap(), 1);
        cp.id = 1;
        let line = |e: &ChainEntry| ExportLine::Record {
            record: e.record.clone(),
            prev_hash: e.prev_hash.map(|h| to_hex(&h)),
            hash: e.hash.map(|h| to_hex(&h)),
        };
        let mut lines: Vec<ExportLine> = entries.iter().map(line).collect();
        lines.push(ExportLine::from(&cp));
        let trusted = vec![key.verifying_key()];
        let whole = verify_export(&lines, trusted.clone());
        assert!(whole.ok() && whole.anchored_after.is_none(), "{whole:?}");
        assert_eq!(whole.signed_through, Some(6));

        let tail = verify_export(&lines[3..], trusted.clone());
        assert!(tail.ok(), "{tail:?}");
        assert_eq!((tail.anchored_after, tail.chained), (Some(3), 3));

        let mut altered = lines.clone();
        if let ExportLine::Record { record, .. } = &mut altered[4] {
            record.outcome = "failed".into();
        }
        assert_eq!(
            verify_export(&altered, trusted.clone()).problem,
            Some(Break::Altered { id: 5 })
        );
        let mut dropped = lines.clone();
        dropped.remove(2);
        assert_eq!(
            verify_export(&dropped, trusted)
                .problem
                .map(|b| b.record_id()),
            Some(3)
        );
    }

    #[test]
    fn hex_round_trip() {
        let h: Hash = [0xab; 32];
        assert_eq!(from_hex::<32>(&to_hex(&h)), Some(h));
        assert_eq!(from_hex::<32>("zz"), None);
        assert_eq!(from_hex::<2>("ABcd"), Some([0xab, 0xcd]));
    }
}
