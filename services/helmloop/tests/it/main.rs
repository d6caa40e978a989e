//! Integration tests of the HelmLoop office: real PostgreSQL (test kit), real gRPC, Ward
//! deciding every call.

mod authority;
mod common;
mod conformance;
mod effect;
mod equivocation;
mod limits;
mod store;
