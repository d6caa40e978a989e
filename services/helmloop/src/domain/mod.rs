//! Pure rules of the office: what a submitted record is (verified, with its identity and the
//! authority appending it needs) and how a stored evaluation input is assembled. No sqlx, no
//! tonic, no clock; canonicalization, digests, schemas and reduction are `lychd-helmloop`'s.

pub mod input;
pub mod record;
pub mod summary;
