//! SQL on the `helmloop` schema only, one module per aggregate: `records` (the append-only
//! record store) and `evaluations` (stored evaluations by input digest). The runtime role may
//! insert and read these tables, never update or delete (migration 0002).

pub mod evaluations;
pub mod records;

/// Milliseconds since the Unix epoch as a protobuf timestamp.
pub fn timestamp_ms(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: i32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
    }
}

/// Microseconds since the Unix epoch as a protobuf timestamp.
pub fn timestamp_us(us: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: us.div_euclid(1_000_000),
        nanos: i32::try_from(us.rem_euclid(1_000_000) * 1_000).unwrap_or(0),
    }
}
