//! Server-side sign-in sessions: the browser holds only an opaque random handle (a cookie); the
//! Ward session token it stands for, the person's principal and the CSRF token of its forms stay
//! here, in memory, and are dropped at sign-out or at the Ward session's end, whichever is first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// 32 random bytes as lowercase hex: handles, CSRF tokens, nonces.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Equal without a timing signal.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// One signed-in person. The Ward token is never rendered, logged or `Debug`-printed.
pub struct Session {
    /// The principal's name, as Ward answered the exchange.
    pub principal: String,
    /// The principal's id.
    pub principal_id: String,
    /// The CSRF token every form of this session carries.
    pub csrf: String,
    token: String,
    /// The person's session at each other office the console calls (each bound to that office
    /// alone).
    others: Vec<(&'static str, String)>,
    expires: Instant,
}

impl Session {
    /// The Ward session token, for the person's own calls.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The person's session token for `office`, when the console calls it.
    pub fn token_for(&self, office: &str) -> Option<&str> {
        self.others
            .iter()
            .find(|(o, _)| *o == office)
            .map(|(_, t)| t.as_str())
    }

    pub fn live(&self, now: Instant) -> bool {
        now < self.expires
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

/// Every signed-in session, at most `capacity` of them.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    capacity: usize,
}

/// The store is full of live sessions.
#[derive(Debug)]
pub struct Full;

impl Sessions {
    pub fn new(capacity: usize) -> Self {
        Sessions {
            map: Mutex::new(HashMap::new()),
            capacity,
        }
    }

    fn key(handle: &str) -> String {
        // The map is keyed by the handle's digest: a dump of memory names no usable cookie.
        hex::encode(Sha256::digest(handle.as_bytes()))
    }

    /// Keep a session for `lifetime` (Ward's own lifetime of the session); returns its handle.
    pub fn open(
        &self,
        principal: String,
        principal_id: String,
        token: String,
        others: Vec<(&'static str, String)>,
        lifetime: Duration,
    ) -> Result<String, Full> {
        let now = Instant::now();
        let mut map = self
            .map
            .lock()
            .expect("invariant: no panic while the lock is held");
        if map.len() >= self.capacity {
            map.retain(|_, s| s.live(now));
            if map.len() >= self.capacity {
                return Err(Full);
            }
        }
        let handle = random_hex();
        map.insert(
            Self::key(&handle),
            Arc::new(Session {
                principal,
                principal_id,
                csrf: random_hex(),
                token,
                others,
                expires: now + lifetime,
            }),
        );
        Ok(handle)
    }

    /// The live session of `handle`; an expired one is removed and not returned.
    pub fn get(&self, handle: &str) -> Option<Arc<Session>> {
        let key = Self::key(handle);
        let mut map = self
            .map
            .lock()
            .expect("invariant: no panic while the lock is held");
        match map.get(&key) {
            Some(s) if s.live(Instant::now()) => Some(s.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// End the session of `handle` (sign-out, or Ward no longer accepts its token).
    pub fn close(&self, handle: &str) {
        self.map
            .lock()
            .expect("invariant: no panic while the lock is held")
            .remove(&Self::key(handle));
    }

    pub fn len(&self) -> usize {
        self.map
            .lock()
            .expect("invariant: no panic while the lock is held")
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_handle_until_closed() {
        let s = Sessions::new(4);
        let h = s
            .open(
                "op".into(),
                "id".into(),
                "tok".into(),
                vec![],
                Duration::from_secs(60),
            )
            .expect("room");
        assert_eq!(s.get(&h).expect("open").principal, "op");
        assert!(s.get("another").is_none());
        s.close(&h);
        assert!(s.get(&h).is_none());
    }

    #[test]
    fn an_expired_session_is_gone() {
        let s = Sessions::new(4);
        let h = s
            .open(
                "op".into(),
                "id".into(),
                "tok".into(),
                vec![],
                Duration::ZERO,
            )
            .expect("room");
        assert!(s.get(&h).is_none());
        assert!(s.is_empty());
    }

    #[test]
    fn the_store_is_bounded_and_makes_room_from_expired_sessions() {
        let s = Sessions::new(2);
        s.open("a".into(), "1".into(), "t".into(), vec![], Duration::ZERO)
            .expect("room");
        s.open(
            "b".into(),
            "2".into(),
            "t".into(),
            vec![],
            Duration::from_secs(60),
        )
        .expect("room");
        s.open(
            "c".into(),
            "3".into(),
            "t".into(),
            vec![],
            Duration::from_secs(60),
        )
        .expect("the expired one makes room");
        assert!(
            s.open(
                "d".into(),
                "4".into(),
                "t".into(),
                vec![],
                Duration::from_secs(60)
            )
            .is_err()
        );
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn debug_never_prints_the_token() {
        let s = Sessions::new(1);
        let h = s
            .open(
                "op".into(),
                "id".into(),
                "very-secret".into(),
                vec![],
                Duration::from_secs(9),
            )
            .expect("room");
        let text = format!("{:?}", s.get(&h).expect("open"));
        assert!(!text.contains("very-secret") && !text.contains(&s.get(&h).expect("open").csrf));
    }
}
