//! Pure rules of the Archive: names and bounds of input (`names`), the lifecycle state machine
//! (`lifecycle`), the digests that bind intake replays and receipts (`digest`) and how recalled
//! notes are fitted to a budget and receipts checked again (`recall`). No sqlx, no tonic, no
//! clock.

pub mod digest;
pub mod lifecycle;
pub mod names;
pub mod recall;
