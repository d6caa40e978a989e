//! The operator tool's data that others check: the grants `lychd provision enroll` and
//! `lychd dev` make ([`grants`]), linked by the workspace's tidy test as it is compiled here.

pub mod grants;
