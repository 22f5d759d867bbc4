//! The HTTP server transport (being written).
