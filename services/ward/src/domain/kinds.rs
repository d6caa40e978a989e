//! Kinds of principal and of credential, as stored (`text` columns with `CHECK`s).

/// What a principal is. Immutable once enrolled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrincipalKind {
    Human,
    Service,
    Peer,
    Node,
}

impl PrincipalKind {
    /// Humans have a user account (a display name); services, peers and nodes do not.
    pub const fn has_user_account(self) -> bool {
        match self {
            PrincipalKind::Human => true,
            PrincipalKind::Service | PrincipalKind::Peer | PrincipalKind::Node => false,
        }
    }
}

impl PrincipalKind {
    pub const ALL: [PrincipalKind; 4] = [
        PrincipalKind::Human,
        PrincipalKind::Service,
        PrincipalKind::Peer,
        PrincipalKind::Node,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::Human => "human",
            PrincipalKind::Service => "service",
            PrincipalKind::Peer => "peer",
            PrincipalKind::Node => "node",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// How often a credential may be exchanged for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CredentialKind {
    /// Exactly once.
    Enrollment,
    /// Until rotated, revoked or expired (services and operators, so they can restart).
    Standing,
}

impl CredentialKind {
    /// Exchanged once, then spent.
    pub const fn single_use(self) -> bool {
        match self {
            CredentialKind::Enrollment => true,
            CredentialKind::Standing => false,
        }
    }
}

impl CredentialKind {
    pub const ALL: [CredentialKind; 2] = [CredentialKind::Enrollment, CredentialKind::Standing];

    pub const fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Enrollment => "enrollment",
            CredentialKind::Standing => "standing",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for k in PrincipalKind::ALL {
            assert_eq!(PrincipalKind::parse(k.as_str()), Some(k));
        }
        for k in CredentialKind::ALL {
            assert_eq!(CredentialKind::parse(k.as_str()), Some(k));
        }
        for bad in ["", "Human", "agent", "human ", "standing"] {
            assert_eq!(PrincipalKind::parse(bad), None, "{bad:?}");
        }
        for bad in ["", "Standing", "human", "once"] {
            assert_eq!(CredentialKind::parse(bad), None, "{bad:?}");
        }
    }
}
