//! Lifetimes. Credentials: a requested TTL of 0 means the kind's default; above the kind's cap
//! is bad input. Sessions: 0 means the default, and any request is capped (the contract says
//! "capped by Ward"); a session never outlives its credential (the store caps it by the
//! credential's expiry with the database clock).

use super::kinds::CredentialKind;

const DAY: u32 = 86_400;

pub const ENROLLMENT_DEFAULT_SECS: u32 = DAY;
pub const ENROLLMENT_MAX_SECS: u32 = 30 * DAY;
pub const STANDING_DEFAULT_SECS: u32 = 365 * DAY;
pub const STANDING_MAX_SECS: u32 = 3 * 365 * DAY;

/// Default session lifetime: an office renews at two thirds of it.
pub const SESSION_DEFAULT_SECS: u32 = 3_600;
/// Longest session Ward issues.
pub const SESSION_MAX_SECS: u32 = 12 * 3_600;

/// The lifetime of a new credential of `kind`, in seconds.
pub fn credential_ttl(kind: CredentialKind, requested: u32) -> Result<u32, &'static str> {
    let (default, max, too_long) = match kind {
        CredentialKind::Enrollment => (
            ENROLLMENT_DEFAULT_SECS,
            ENROLLMENT_MAX_SECS,
            "must be at most 2592000 seconds (30 days) for an enrollment credential",
        ),
        CredentialKind::Standing => (
            STANDING_DEFAULT_SECS,
            STANDING_MAX_SECS,
            "must be at most 94608000 seconds (3 years) for a standing credential",
        ),
    };
    match requested {
        0 => Ok(default),
        t if t > max => Err(too_long),
        t => Ok(t),
    }
}

/// The lifetime of a new session, in seconds (before the credential's expiry caps it).
pub fn session_ttl(requested: u32) -> u32 {
    match requested {
        0 => SESSION_DEFAULT_SECS,
        t => t.min(SESSION_MAX_SECS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_lifetimes() {
        use CredentialKind::*;
        assert_eq!(credential_ttl(Enrollment, 0), Ok(DAY));
        assert_eq!(credential_ttl(Standing, 0), Ok(365 * DAY));
        assert_eq!(credential_ttl(Enrollment, 1), Ok(1));
        assert_eq!(credential_ttl(Standing, 1), Ok(1));
        assert_eq!(credential_ttl(Enrollment, 30 * DAY), Ok(30 * DAY));
        assert!(credential_ttl(Enrollment, 30 * DAY + 1).is_err());
        assert_eq!(credential_ttl(Standing, 3 * 365 * DAY), Ok(3 * 365 * DAY));
        assert!(credential_ttl(Standing, 3 * 365 * DAY + 1).is_err());
        assert!(credential_ttl(Standing, u32::MAX).is_err());
        assert!(credential_ttl(Enrollment, u32::MAX).is_err());
    }

    #[test]
    fn session_lifetimes() {
        assert_eq!(session_ttl(0), 3_600);
        assert_eq!(session_ttl(1), 1);
        assert_eq!(session_ttl(600), 600);
        assert_eq!(session_ttl(SESSION_MAX_SECS), SESSION_MAX_SECS);
        assert_eq!(session_ttl(SESSION_MAX_SECS + 1), SESSION_MAX_SECS);
        assert_eq!(session_ttl(u32::MAX), SESSION_MAX_SECS);
    }
}
