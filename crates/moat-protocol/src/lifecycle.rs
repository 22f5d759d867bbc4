//! The connection lifecycle as a pure state machine, for both roles.
//!
//! ```text
//! UNINITIALIZED ──initialize──▶ INITIALIZING ──initialized──▶ ACTIVE ──close/error──▶ SHUTDOWN
//!       └──────────── a modern-era (2026-07-28) request: straight to ACTIVE ───────────┘
//! ```
//! Before ACTIVE only `initialize` and `ping` are served; a second `initialize` is refused;
//! any transport error ends in SHUTDOWN. The async layer asks this type before it dispatches
//! and tells it what happened; it never does I/O itself.

use crate::error::{ErrorObject, INVALID_REQUEST};
use crate::types::methods;
use crate::version::{Era, ProtocolVersion};

/// Which side of the connection we are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// We sent (or will send) `initialize`.
    Client,
    /// We answer `initialize`.
    Server,
}

/// Where the connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// Nothing exchanged yet.
    Uninitialized,
    /// `initialize` answered (server) or sent (client); waiting for the handshake to finish.
    Initializing,
    /// Normal operation.
    Active,
    /// Closed, by either side or by a transport error. Final.
    Shutdown,
}

/// A lifecycle transition that is not allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LifecycleError {
    /// The connection has shut down.
    #[error("the connection has shut down")]
    Shutdown,
    /// `initialize` was already done.
    #[error("already initialized")]
    AlreadyInitialized,
    /// An operation needs the connection to be active first.
    #[error("not initialized: {0} is only allowed after the initialize handshake")]
    NotInitialized(String),
}

/// The lifecycle state machine of one connection.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    role: Role,
    state: State,
    version: Option<ProtocolVersion>,
}

impl Lifecycle {
    /// A fresh connection.
    pub fn new(role: Role) -> Self {
        Lifecycle {
            role,
            state: State::Uninitialized,
            version: None,
        }
    }

    /// Our role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The negotiated revision, once known.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.version
    }

    /// The negotiated era, once known.
    pub fn era(&self) -> Option<Era> {
        self.version.map(ProtocolVersion::era)
    }

    /// Server: may an incoming request with this method be served now?
    /// The answer for `Err` is the error response to send.
    pub fn check_incoming_request(&self, method: &str) -> Result<(), ErrorObject> {
        let refuse = |e: LifecycleError| Err(ErrorObject::new(INVALID_REQUEST, e.to_string()));
        if method == methods::PING {
            return match self.state {
                State::Shutdown => refuse(LifecycleError::Shutdown),
                _ => Ok(()),
            };
        }
        match (self.state, method == methods::INITIALIZE) {
            (State::Shutdown, _) => refuse(LifecycleError::Shutdown),
            (State::Uninitialized, true) => Ok(()),
            (State::Uninitialized, false) | (State::Initializing, false)
                if self.role == Role::Server =>
            {
                refuse(LifecycleError::NotInitialized(method.to_owned()))
            }
            (_, true) => refuse(LifecycleError::AlreadyInitialized),
            _ => Ok(()),
        }
    }

    /// Server: we answered `initialize` with `version`.
    pub fn initialize_answered(&mut self, version: ProtocolVersion) {
        if self.state == State::Uninitialized {
            self.state = State::Initializing;
            self.version = Some(version);
        }
    }

    /// Server: `notifications/initialized` arrived. Returns whether it changed anything
    /// (one arriving at any other time is ignored, as a stray notification).
    pub fn initialized_received(&mut self) -> bool {
        if self.state == State::Initializing {
            self.state = State::Active;
            true
        } else {
            false
        }
    }

    /// Client: we are about to send `initialize`.
    pub fn initialize_sent(&mut self) -> Result<(), LifecycleError> {
        match self.state {
            State::Uninitialized => {
                self.state = State::Initializing;
                Ok(())
            }
            State::Shutdown => Err(LifecycleError::Shutdown),
            _ => Err(LifecycleError::AlreadyInitialized),
        }
    }

    /// Client: the server answered `initialize` and we accepted `version`
    /// (and are sending `notifications/initialized`).
    pub fn handshake_done(&mut self, version: ProtocolVersion) -> Result<(), LifecycleError> {
        match self.state {
            State::Initializing => {
                self.state = State::Active;
                self.version = Some(version);
                Ok(())
            }
            State::Shutdown => Err(LifecycleError::Shutdown),
            _ => Err(LifecycleError::AlreadyInitialized),
        }
    }

    /// Either role: the connection speaks the stateless modern era at `version`; there is
    /// no handshake, so it is active at once.
    pub fn enter_modern(&mut self, version: ProtocolVersion) -> Result<(), LifecycleError> {
        match self.state {
            State::Shutdown => Err(LifecycleError::Shutdown),
            State::Uninitialized => {
                self.state = State::Active;
                self.version = Some(version);
                Ok(())
            }
            State::Active if self.era() == Some(Era::Modern) => {
                self.version = Some(version);
                Ok(())
            }
            _ => Err(LifecycleError::AlreadyInitialized),
        }
    }

    /// Client: the handshake failed; back to the start so another attempt (or a fallback) can run.
    pub fn handshake_failed(&mut self) {
        if self.state == State::Initializing {
            self.state = State::Uninitialized;
        }
    }

    /// May we send a request with this method now?
    pub fn check_outgoing_request(&self, method: &str) -> Result<(), LifecycleError> {
        match self.state {
            State::Shutdown => Err(LifecycleError::Shutdown),
            State::Active => Ok(()),
            _ if method == methods::PING
                || method == methods::INITIALIZE
                || method == methods::SERVER_DISCOVER =>
            {
                Ok(())
            }
            _ => Err(LifecycleError::NotInitialized(method.to_owned())),
        }
    }

    /// The connection closed or the transport failed. Final.
    pub fn shutdown(&mut self) {
        self.state = State::Shutdown;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_walks_the_handshake() {
        let mut l = Lifecycle::new(Role::Server);
        assert!(l.check_incoming_request("tools/list").is_err());
        assert!(l.check_incoming_request("ping").is_ok());
        assert!(l.check_incoming_request("initialize").is_ok());
        l.initialize_answered(ProtocolVersion::V2025_06_18);
        assert_eq!(l.state(), State::Initializing);
        assert!(l.check_incoming_request("tools/list").is_err());
        assert!(l.check_incoming_request("initialize").is_err());
        assert!(l.initialized_received());
        assert_eq!(l.state(), State::Active);
        assert!(l.check_incoming_request("tools/list").is_ok());
        let second = l.check_incoming_request("initialize").unwrap_err();
        assert_eq!(second.code, INVALID_REQUEST);
        assert!(!l.initialized_received());
        l.shutdown();
        assert!(l.check_incoming_request("ping").is_err());
    }

    #[test]
    fn client_walks_the_handshake() {
        let mut l = Lifecycle::new(Role::Client);
        assert!(l.check_outgoing_request("tools/list").is_err());
        l.initialize_sent().unwrap();
        assert!(l.initialize_sent().is_err());
        l.handshake_done(ProtocolVersion::V2025_11_25).unwrap();
        assert!(l.check_outgoing_request("tools/list").is_ok());
        l.shutdown();
        assert_eq!(
            l.check_outgoing_request("ping"),
            Err(LifecycleError::Shutdown)
        );
    }

    #[test]
    fn modern_is_active_at_once_and_refuses_initialize_after() {
        let mut l = Lifecycle::new(Role::Server);
        l.enter_modern(ProtocolVersion::V2026_07_28).unwrap();
        assert_eq!(l.state(), State::Active);
        assert!(l.check_incoming_request("initialize").is_err());
        let mut h = Lifecycle::new(Role::Server);
        h.initialize_answered(ProtocolVersion::V2025_11_25);
        assert!(h.enter_modern(ProtocolVersion::V2026_07_28).is_err());
    }
}
