//! Sign-in attempts, limited per client address and in total within a window, in bounded
//! memory: at most `MAX_CLIENTS` addresses are remembered; when that many are counted within the
//! window, further new addresses are refused until it passes (never an unbounded map).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many client addresses are remembered at most.
pub const MAX_CLIENTS: usize = 4096;

pub struct SignInLimit {
    per_client: u32,
    total: u32,
    window: Duration,
    state: Mutex<State>,
}

struct State {
    started: Instant,
    total: u32,
    clients: HashMap<IpAddr, u32>,
}

impl SignInLimit {
    /// At most `per_client` attempts from one address and `total` from all per `window`.
    pub fn new(per_client: u32, total: u32, window: Duration) -> Self {
        SignInLimit {
            per_client,
            total,
            window,
            state: Mutex::new(State {
                started: Instant::now(),
                total: 0,
                clients: HashMap::new(),
            }),
        }
    }

    /// Count one attempt from `client`: false when it is over a limit (then it is not made).
    pub fn admit(&self, client: IpAddr) -> bool {
        self.admit_at(client, Instant::now())
    }

    fn admit_at(&self, client: IpAddr, now: Instant) -> bool {
        let mut s = self
            .state
            .lock()
            .expect("invariant: no panic while the lock is held");
        if now.duration_since(s.started) >= self.window {
            s.started = now;
            s.total = 0;
            s.clients.clear();
        }
        if s.total >= self.total {
            return false;
        }
        let known = s.clients.contains_key(&client);
        if !known && s.clients.len() >= MAX_CLIENTS {
            return false;
        }
        let n = s.clients.entry(client).or_insert(0);
        if *n >= self.per_client {
            return false;
        }
        *n += 1;
        s.total += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u32) -> IpAddr {
        IpAddr::from(n.to_be_bytes())
    }

    #[test]
    fn one_client_gets_its_share_per_window_then_again_after_it() {
        let l = SignInLimit::new(3, 100, Duration::from_secs(60));
        let t = Instant::now();
        assert!((0..3).all(|_| l.admit_at(ip(1), t)));
        assert!(!l.admit_at(ip(1), t));
        assert!(
            l.admit_at(ip(2), t),
            "another client is not held by the first"
        );
        assert!(l.admit_at(ip(1), t + Duration::from_secs(61)));
    }

    #[test]
    fn the_total_bounds_every_client_together() {
        let l = SignInLimit::new(3, 5, Duration::from_secs(60));
        let t = Instant::now();
        assert_eq!((0..10).filter(|n| l.admit_at(ip(*n), t)).count(), 5);
    }

    #[test]
    fn memory_is_bounded_by_the_client_cap() {
        let l = SignInLimit::new(1, u32::MAX, Duration::from_secs(60));
        let t = Instant::now();
        let admitted = (0..(MAX_CLIENTS as u32 + 10))
            .filter(|n| l.admit_at(ip(*n), t))
            .count();
        assert_eq!(admitted, MAX_CLIENTS);
        assert_eq!(l.state.lock().expect("lock").clients.len(), MAX_CLIENTS);
    }
}
