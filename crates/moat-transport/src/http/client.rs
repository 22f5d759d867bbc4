//! The HTTP client transport (being written).
