//! Compiles every `.proto` under `lychd/` with protox (pure Rust, no system `protoc`) and writes
//! the encoded file descriptor set that the offices serve through reflection.

use std::path::PathBuf;

/// `google/rpc/error_details.proto` and every `lychd/<package>/v1/<name>.proto`, sorted: a new
/// office's contract is compiled by adding its file, nothing else.
fn files() -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut files = vec!["google/rpc/error_details.proto".to_owned()];
    for package in std::fs::read_dir("lychd")? {
        let dir = package?.path().join("v1");
        for file in std::fs::read_dir(&dir)? {
            let path = file?.path();
            if path.extension().is_some_and(|e| e == "proto") {
                files.push(path.to_str().ok_or("proto paths are UTF-8")?.to_owned());
            }
        }
    }
    files[1..].sort();
    Ok(files)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let files = files()?;
    let fds = protox::compile(&files, ["."])?;
    let descriptor_path = out.join("lychd_descriptor.bin");
    std::fs::write(&descriptor_path, prost::Message::encode_to_vec(&fds))?;
    tonic_prost_build::configure()
        .file_descriptor_set_path(&descriptor_path)
        .skip_protoc_run()
        .compile_fds(fds)?;
    println!("cargo:rerun-if-changed=lychd");
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    Ok(())
}
