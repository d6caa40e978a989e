//! Fuzz target `parse`: the tree parser and the streaming canonicalizer must
//! agree on every input (same canonical bytes or the same error code and
//! offset), canonical bytes must be a fixed point, and nothing may panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use lychd_helmloop::{Domain, canonicalize, digest_json, parse, to_canonical_vec};

fuzz_target!(|data: &[u8]| {
    let tree = parse(data);
    let streamed = canonicalize(data);
    match (&tree, &streamed) {
        (Ok(v), Ok(c)) => {
            assert!(std::str::from_utf8(data).is_ok(), "accepted invalid utf-8");
            assert_eq!(&to_canonical_vec(v).expect("parsed values are canonical"), c);
            assert_eq!(&canonicalize(c).expect("canonical bytes re-parse"), c);
            assert!(digest_json(Domain::Record, data).is_ok());
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "tree and streaming parsers disagree");
            assert_eq!(digest_json(Domain::Binding, data).err(), Some(*a));
        }
        _ => panic!("tree and streaming parsers disagree on acceptance"),
    }
    let _ = lychd_helmloop::validate::validate_document(data);
});
