//! Integration tests of the Archive office: real PostgreSQL (test kit), real gRPC, Ward
//! deciding every call.

mod authority;
mod common;
mod faults;
mod input;
mod inspect;
mod intake;
mod lifecycle;
mod model;
mod recall;
mod receipts;
mod retention;
mod timeouts;
