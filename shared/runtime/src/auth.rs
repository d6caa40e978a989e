//! Authentication and authorization come from `lychd-auth` (Ward decides everything); this
//! module re-exports what offices use through the runtime.

/// An office's own Ward session (the Runner presents it when it asks for its effect-time
/// permission).
pub use lychd_auth::credentials::SessionSource;
pub use lychd_auth::{
    Action, AuthError, Authorizer, Decision, Principal, Query, Verifier, actions, bearer,
    is_authentication_reason,
};
