//! Exchanged tokens, kept per user until shortly before they expire, bounded in number:
//! the least recently used goes first when full. Keys are a user (issuer and subject);
//! one user's token is never found under another's key.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::exchange::Exchanged;
use super::user::UserKey;

/// A token this close to its expiry is exchanged again rather than sent.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

struct Entry {
    token: Exchanged,
    used: Instant,
}

/// The cache of one downstream server.
pub(crate) struct TokenCache {
    capacity: usize,
    entries: Mutex<HashMap<UserKey, Entry>>,
}

impl TokenCache {
    pub(crate) fn new(capacity: usize) -> TokenCache {
        TokenCache {
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// `user`'s token, if one is held that is not about to expire.
    pub(crate) fn get(&self, user: &UserKey) -> Option<String> {
        let now = Instant::now();
        let mut entries = lock(&self.entries);
        let entry = entries.get_mut(user)?;
        if entry.token.expires <= now + EXPIRY_MARGIN {
            entries.remove(user);
            return None;
        }
        entry.used = now;
        Some(entry.token.value.clone())
    }

    /// Keeps `token` for `user`, making room if full (expired ones first, then the least
    /// recently used).
    pub(crate) fn put(&self, user: &UserKey, token: Exchanged) {
        let now = Instant::now();
        let mut entries = lock(&self.entries);
        if !entries.contains_key(user) && entries.len() >= self.capacity {
            entries.retain(|_, e| e.token.expires > now + EXPIRY_MARGIN);
            if entries.len() >= self.capacity
                && let Some(oldest) = entries
                    .iter()
                    .min_by_key(|(_, e)| e.used)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
            }
        }
        entries.insert(user.clone(), Entry { token, used: now });
    }

    /// Forgets `user`'s token if it is `value` (the server refused it).
    pub(crate) fn forget(&self, user: &UserKey, value: &str) {
        let mut entries = lock(&self.entries);
        if entries.get(user).is_some_and(|e| e.token.value == value) {
            entries.remove(user);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.entries).len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(s: &str) -> UserKey {
        UserKey::new("https://idp", s)
    }

    fn token(v: &str, secs: u64) -> Exchanged {
        Exchanged {
            value: v.into(),
            expires: Instant::now() + Duration::from_secs(secs),
        }
    }

    #[test]
    fn each_user_finds_only_their_own() {
        let cache = TokenCache::new(8);
        cache.put(&user("alice"), token("ta", 600));
        assert_eq!(cache.get(&user("alice")).as_deref(), Some("ta"));
        assert_eq!(cache.get(&user("bob")), None);
        // The same subject of another issuer is someone else.
        assert_eq!(cache.get(&UserKey::new("https://other", "alice")), None);
    }

    #[test]
    fn near_expiry_is_a_miss_and_forget_needs_the_same_token() {
        let cache = TokenCache::new(8);
        cache.put(&user("alice"), token("ta", 10));
        assert_eq!(cache.get(&user("alice")), None);
        cache.put(&user("bob"), token("tb", 600));
        cache.forget(&user("bob"), "other");
        assert!(cache.get(&user("bob")).is_some());
        cache.forget(&user("bob"), "tb");
        assert!(cache.get(&user("bob")).is_none());
    }

    #[test]
    fn bounded_least_recently_used_goes() {
        let cache = TokenCache::new(2);
        cache.put(&user("a"), token("1", 600));
        std::thread::sleep(Duration::from_millis(2));
        cache.put(&user("b"), token("2", 600));
        std::thread::sleep(Duration::from_millis(2));
        assert!(cache.get(&user("a")).is_some());
        std::thread::sleep(Duration::from_millis(2));
        cache.put(&user("c"), token("3", 600));
        assert_eq!(cache.len(), 2);
        assert!(cache.get(&user("b")).is_none());
        assert!(cache.get(&user("a")).is_some() && cache.get(&user("c")).is_some());
    }
}
