//! The grammar of names Ward decides over is `lychd-auth`'s (`lychd_auth::grammar`), defined
//! once for every office; re-exported here so `domain::grammar` paths keep naming it.

pub use lychd_auth::grammar::*;
