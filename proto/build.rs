//! Compiles every `.proto` under `lychd/` with protox (pure Rust, no system `protoc`) and writes
//! the encoded file descriptor set that the offices serve through reflection.

use std::path::PathBuf;

const FILES: &[&str] = &[
    "google/rpc/error_details.proto",
    "lychd/common/v1/common.proto",
    "lychd/dispatcher/v1/dispatcher.proto",
    "lychd/orchestrator/v1/orchestrator.proto",
    "lychd/ward/v1/ward.proto",
    "lychd/archive/v1/archive.proto",
    "lychd/helmloop/v1/helmloop.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile(FILES, ["."])?;
    let descriptor_path = out.join("lychd_descriptor.bin");
    std::fs::write(&descriptor_path, prost::Message::encode_to_vec(&fds))?;
    tonic_prost_build::configure()
        .file_descriptor_set_path(&descriptor_path)
        .skip_protoc_run()
        .compile_fds(fds)?;
    for f in FILES {
        println!("cargo:rerun-if-changed={f}");
    }
    Ok(())
}
