//! How many times request params were read: by the session's head reader and by
//! [`decode_params`](crate::jsonrpc::decode_params). Counted only with the `parse-count`
//! feature, for tests that keep the one-read-per-request property from regressing; without
//! it every function here is empty.

#[cfg(feature = "parse-count")]
static READS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One read of a request's params (by the head reader, or a handler's `decode_params`).
#[inline]
pub(crate) fn params_read() {
    #[cfg(feature = "parse-count")]
    READS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The reads so far in this process (always 0 without the `parse-count` feature).
pub fn params_reads() -> usize {
    #[cfg(feature = "parse-count")]
    return READS.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "parse-count"))]
    0
}
