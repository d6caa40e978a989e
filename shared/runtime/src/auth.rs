//! Authentication and authorization come from `lychd-auth` (Ward decides everything); this
//! module re-exports what offices use through the runtime.

pub use lychd_auth::{
    Action, AuthError, Authorizer, Decision, Principal, Query, Verifier, actions, bearer,
    is_authentication_reason,
};
