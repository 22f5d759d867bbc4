//! The `[pins]` table: what is pinned and what a scan finding does ([`crate::pins`] and
//! [`crate::launch_pins`] do the pinning; the table is documented there).

use serde::{Deserialize, Serialize};

use crate::scan::{Finding, FindingKind, ScanAction};

/// The `[pins]` table of the configuration (see the module docs for the defaults and why).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct PinsConfig {
    /// Pin tool definitions and hold back changed ones.
    pub enabled: bool,
    /// Which servers' changed launches are held until approved.
    pub servers: ServerPins,
    /// What to do when a definition carries invisible Unicode.
    pub invisible: ScanAction,
    /// What to do when a definition carries instructions aimed at the model.
    pub instructions: ScanAction,
    /// What to do when a definition names another server's tool.
    pub shadowing: ScanAction,
}

// Not derived: pinning is on by default, and `bool::default()` is false.
impl Default for PinsConfig {
    fn default() -> Self {
        PinsConfig {
            enabled: true,
            servers: ServerPins::default(),
            invisible: ScanAction::Block,
            instructions: ScanAction::Block,
            shadowing: ScanAction::Warn,
        }
    }
}

impl PinsConfig {
    /// The configured action for one kind of finding.
    pub fn action(&self, kind: FindingKind) -> ScanAction {
        match kind {
            FindingKind::InvisibleUnicode => self.invisible,
            FindingKind::HiddenInstructions => self.instructions,
            FindingKind::Shadowing => self.shadowing,
        }
    }

    /// The strongest action any of `findings` calls for (`Off` when there are none).
    pub fn verdict(&self, findings: &[Finding]) -> ScanAction {
        findings
            .iter()
            .map(|f| self.action(f.kind))
            .max()
            .unwrap_or(ScanAction::Off)
    }
}

/// `[pins] servers`: whose changed launches are held until approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ServerPins {
    /// Servers read from a client's JSON file (imported, or the configuration itself).
    #[default]
    Imports,
    /// Every server, moat.toml's own too.
    All,
    /// No launch pins.
    Off,
}
