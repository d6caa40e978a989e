//! The LychD contracts. One module per protobuf package; `FILE_DESCRIPTOR_SET` is the encoded
//! descriptor set of every package, served by each office through gRPC reflection.
//!
//! Invariant: this crate is generated code plus re-exports only; no behaviour lives here.

/// Encoded `FileDescriptorSet` of all `lychd.*` packages (for reflection).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/lychd_descriptor.bin"));

pub mod common {
    pub mod v1 {
        tonic::include_proto!("lychd.common.v1");
    }
}
pub mod dispatcher {
    pub mod v1 {
        tonic::include_proto!("lychd.dispatcher.v1");
    }
}
pub mod orchestrator {
    pub mod v1 {
        tonic::include_proto!("lychd.orchestrator.v1");
    }
}
pub mod ward {
    pub mod v1 {
        tonic::include_proto!("lychd.ward.v1");
    }
}
pub mod archive {
    pub mod v1 {
        tonic::include_proto!("lychd.archive.v1");
    }
}
pub mod helmloop {
    pub mod v1 {
        tonic::include_proto!("lychd.helmloop.v1");
    }
}
