//! The {{Office}} office's rules: pure (no sqlx, tonic or tokio, no clock read: time comes in
//! as a value), one module per concept as the office grows.
