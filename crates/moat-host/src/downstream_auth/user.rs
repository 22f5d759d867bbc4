//! Who a per-user downstream credential belongs to.

/// Who a per-user credential belongs to: the issuer that vouched and the subject.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct UserKey {
    pub(super) issuer: String,
    pub(super) subject: String,
}

impl UserKey {
    pub(crate) fn new(issuer: &str, subject: &str) -> UserKey {
        UserKey {
            issuer: issuer.to_owned(),
            subject: subject.to_owned(),
        }
    }
}
