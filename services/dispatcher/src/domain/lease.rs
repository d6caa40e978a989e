//! Lease rules that need no database: TTL bounds, priority range, and lease state. Expiry
//! itself is decided by the database clock in the store.

/// Highest priority.
pub const PRIORITY_MAX: u32 = 100;

/// Lease lifetime bounds, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlPolicy {
    pub default: u32,
    pub min: u32,
    pub max: u32,
}

impl TtlPolicy {
    /// The lifetime to grant for a request (`0` takes the default).
    pub fn resolve(&self, requested: u32) -> Result<u32, String> {
        match requested {
            0 => Ok(self.default),
            t if t < self.min || t > self.max => Err(format!(
                "must be 0 (default) or between {} and {} seconds",
                self.min, self.max
            )),
            t => Ok(t),
        }
    }
}

/// Whether a priority is in range.
pub fn check_priority(p: u32) -> Result<(), String> {
    if p > PRIORITY_MAX {
        Err(format!("must be between 0 and {PRIORITY_MAX}"))
    } else {
        Ok(())
    }
}

/// State of a lease at a given database time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    /// Counts for drain.
    Active,
    Expired,
    Released,
}

impl LeaseState {
    pub fn of(released: bool, expired: bool) -> LeaseState {
        if released {
            LeaseState::Released
        } else if expired {
            LeaseState::Expired
        } else {
            LeaseState::Active
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_bounds() {
        let p = TtlPolicy {
            default: 300,
            min: 5,
            max: 3600,
        };
        assert_eq!(p.resolve(0), Ok(300));
        assert_eq!(p.resolve(5), Ok(5));
        assert_eq!(p.resolve(3600), Ok(3600));
        assert!(p.resolve(4).is_err());
        assert!(p.resolve(3601).is_err());
        assert!(p.resolve(u32::MAX).is_err());
    }

    #[test]
    fn priorities() {
        assert!(check_priority(0).is_ok());
        assert!(check_priority(100).is_ok());
        assert!(check_priority(101).is_err());
    }

    #[test]
    fn states() {
        assert_eq!(LeaseState::of(false, false), LeaseState::Active);
        assert_eq!(LeaseState::of(false, true), LeaseState::Expired);
        assert_eq!(LeaseState::of(true, true), LeaseState::Released);
        assert_eq!(LeaseState::of(true, false), LeaseState::Released);
    }
}
