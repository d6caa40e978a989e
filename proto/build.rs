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

/// The Rust path of the message `.lychd.<office>.v1.<Name>` (its module in `src/lib.rs`).
fn rust_path(type_name: &str) -> Result<String, Box<dyn std::error::Error>> {
    let mut parts: Vec<&str> = type_name.trim_start_matches('.').split('.').collect();
    let name = parts.pop().ok_or("a type has a name")?;
    if parts.first() != Some(&"lychd") || !name.chars().next().is_some_and(char::is_uppercase) {
        return Err(format!("request type {type_name} is not a top-level lychd message").into());
    }
    Ok(format!("crate::{}::{name}", parts[1..].join("::")))
}

/// `request_decoder`: for every method of every service, the prost decoder of its request
/// message (what the server's codec will decode), keyed by the method's HTTP/2 path.
fn requests(fds: &prost_types::FileDescriptorSet) -> Result<String, Box<dyn std::error::Error>> {
    let mut arms = String::new();
    for file in &fds.file {
        for service in &file.service {
            for method in &service.method {
                let path = format!("/{}.{}/{}", file.package(), service.name(), method.name());
                let ty = rust_path(method.input_type())?;
                arms.push_str(&format!(
                    "        {path:?} => Some(|b| <{ty} as prost::Message>::decode(b).map(drop)),\n"
                ));
            }
        }
    }
    Ok(format!(
        "/// The decoder of the request message of the method at `path` (`/<package>.<Service>/<Method>`),\n\
         /// `None` for a path that is not a method of a `lychd` service.\n\
         pub fn request_decoder(path: &str) -> Option<RequestDecoder> {{\n    match path {{\n{arms}        _ => None,\n    }}\n}}\n"
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let files = files()?;
    let fds = protox::compile(&files, ["."])?;
    let descriptor_path = out.join("lychd_descriptor.bin");
    std::fs::write(&descriptor_path, prost::Message::encode_to_vec(&fds))?;
    std::fs::write(out.join("lychd_requests.rs"), requests(&fds)?)?;
    tonic_prost_build::configure()
        .file_descriptor_set_path(&descriptor_path)
        // A reduction's input (up to the 4 MiB wire cap) is the one large field on a hot path:
        // decoded as a view of the received buffer, not copied into a fresh vector.
        .bytes(".lychd.helmloop.v1.ReduceRequest.input")
        .skip_protoc_run()
        .compile_fds(fds)?;
    println!("cargo:rerun-if-changed=lychd");
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    Ok(())
}
