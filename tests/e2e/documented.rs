//! Every element of the `lychd.*` contracts carries a comment: services, methods, messages,
//! fields, oneofs, enums and enum values. The comments are what `grpcurl describe` shows over
//! reflection, so this walks the served descriptor set (`FILE_DESCRIPTOR_SET`, compiled with
//! source info) rather than the `.proto` text.

use std::collections::HashSet;

use prost::Message;
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FileDescriptorProto, FileDescriptorSet,
    ServiceDescriptorProto,
};

// Field numbers of `google/protobuf/descriptor.proto` that make up a `SourceCodeInfo` path.
/// `FileDescriptorProto.message_type`.
const FILE_MESSAGE: i32 = 4;
/// `FileDescriptorProto.enum_type`.
const FILE_ENUM: i32 = 5;
/// `FileDescriptorProto.service`.
const FILE_SERVICE: i32 = 6;
/// `DescriptorProto.field`.
const MESSAGE_FIELD: i32 = 2;
/// `DescriptorProto.nested_type`.
const MESSAGE_NESTED: i32 = 3;
/// `DescriptorProto.enum_type`.
const MESSAGE_ENUM: i32 = 4;
/// `DescriptorProto.oneof_decl`.
const MESSAGE_ONEOF: i32 = 8;
/// `EnumDescriptorProto.value`.
const ENUM_VALUE: i32 = 2;
/// `ServiceDescriptorProto.method`.
const SERVICE_METHOD: i32 = 2;

/// Walks one file and names every element without a leading or trailing comment.
struct Walker {
    /// Paths of the locations that carry a non-blank leading or trailing comment.
    documented: HashSet<Vec<i32>>,
    /// `<kind> <full name>` of each undocumented element, in declaration order.
    missing: Vec<String>,
}

impl Walker {
    fn check(&mut self, path: &[i32], kind: &str, name: &str) {
        if !self.documented.contains(path) {
            self.missing.push(format!("{kind} {name}"));
        }
    }

    fn message(&mut self, path: &mut Vec<i32>, scope: &str, m: &DescriptorProto) {
        let name = format!("{scope}.{}", m.name());
        self.check(path, "message", &name);
        for (i, f) in m.field.iter().enumerate() {
            path.extend([MESSAGE_FIELD, index(i)]);
            self.check(path, "field", &format!("{name}.{}", f.name()));
            path.truncate(path.len() - 2);
        }
        for (i, o) in m.oneof_decl.iter().enumerate() {
            // A proto3 `optional` field gets a synthetic oneof of its own, absent from the
            // source: its field is checked, not it.
            let synthetic = m
                .field
                .iter()
                .filter(|f| f.oneof_index == Some(index(i)))
                .all(|f| f.proto3_optional());
            if synthetic {
                continue;
            }
            path.extend([MESSAGE_ONEOF, index(i)]);
            self.check(path, "oneof", &format!("{name}.{}", o.name()));
            path.truncate(path.len() - 2);
        }
        for (i, nested) in m.nested_type.iter().enumerate() {
            // `map<K, V>` fields compile to a generated `…Entry` message, absent from the
            // source: the map field is checked, not it.
            if nested.options.as_ref().is_some_and(|o| o.map_entry()) {
                continue;
            }
            path.extend([MESSAGE_NESTED, index(i)]);
            self.message(path, &name, nested);
            path.truncate(path.len() - 2);
        }
        for (i, e) in m.enum_type.iter().enumerate() {
            path.extend([MESSAGE_ENUM, index(i)]);
            self.enumeration(path, &name, e);
            path.truncate(path.len() - 2);
        }
    }

    fn enumeration(&mut self, path: &mut Vec<i32>, scope: &str, e: &EnumDescriptorProto) {
        let name = format!("{scope}.{}", e.name());
        self.check(path, "enum", &name);
        for (i, v) in e.value.iter().enumerate() {
            path.extend([ENUM_VALUE, index(i)]);
            self.check(path, "enum value", &format!("{name}.{}", v.name()));
            path.truncate(path.len() - 2);
        }
    }

    fn service(&mut self, path: &mut Vec<i32>, scope: &str, s: &ServiceDescriptorProto) {
        let name = format!("{scope}.{}", s.name());
        self.check(path, "service", &name);
        for (i, m) in s.method.iter().enumerate() {
            path.extend([SERVICE_METHOD, index(i)]);
            self.check(path, "method", &format!("{name}.{}", m.name()));
            path.truncate(path.len() - 2);
        }
    }
}

fn index(i: usize) -> i32 {
    i32::try_from(i).expect("a descriptor has fewer than 2^31 elements")
}

fn has_text(comment: Option<&str>) -> bool {
    comment.is_some_and(|c| !c.trim().is_empty())
}

/// `<kind> <full name>` of every element of `file` that has no comment, in declaration order.
/// A file without source info has no comments at all, so every element of it is reported.
fn undocumented(file: &FileDescriptorProto) -> Vec<String> {
    let documented = file
        .source_code_info
        .iter()
        .flat_map(|info| &info.location)
        .filter(|l| {
            has_text(l.leading_comments.as_deref()) || has_text(l.trailing_comments.as_deref())
        })
        .map(|l| l.path.clone())
        .collect();
    let mut walker = Walker {
        documented,
        missing: Vec::new(),
    };
    let scope = file.package();
    let mut path = Vec::new();
    for (i, m) in file.message_type.iter().enumerate() {
        path.extend([FILE_MESSAGE, index(i)]);
        walker.message(&mut path, scope, m);
        path.clear();
    }
    for (i, e) in file.enum_type.iter().enumerate() {
        path.extend([FILE_ENUM, index(i)]);
        walker.enumeration(&mut path, scope, e);
        path.clear();
    }
    for (i, s) in file.service.iter().enumerate() {
        path.extend([FILE_SERVICE, index(i)]);
        walker.service(&mut path, scope, s);
        path.clear();
    }
    walker.missing
}

#[test]
fn every_lychd_element_is_documented() {
    let set = FileDescriptorSet::decode(lychd_proto::FILE_DESCRIPTOR_SET)
        .expect("FILE_DESCRIPTOR_SET decodes as a FileDescriptorSet");
    let lychd: Vec<&FileDescriptorProto> = set
        .file
        .iter()
        .filter(|f| f.package().starts_with("lychd."))
        .collect();
    let packages: HashSet<&str> = lychd.iter().map(|f| f.package()).collect();
    for package in [
        "lychd.common.v1",
        "lychd.dispatcher.v1",
        "lychd.orchestrator.v1",
        "lychd.ward.v1",
        "lychd.archive.v1",
        "lychd.helmloop.v1",
    ] {
        assert!(
            packages.contains(package),
            "{package} is missing from the descriptor set"
        );
    }
    for f in &lychd {
        assert!(
            f.source_code_info.is_some(),
            "{} was compiled without source info: its comments are not served",
            f.name()
        );
    }
    let missing: Vec<String> = lychd
        .iter()
        .flat_map(|f| {
            undocumented(f)
                .into_iter()
                .map(move |m| format!("  {}: {m}", f.name()))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{} element(s) of the lychd.* contracts have no comment (write one above each):\n{}",
        missing.len(),
        missing.join("\n")
    );
}

/// The walker can fail: in a hand-made file, it names exactly the elements without a comment,
/// at every nesting level it walks, and skips the generated ones (map entries, synthetic oneofs).
#[test]
fn walker_reports_undocumented_elements_of_a_hand_made_file() {
    use prost_types::field_descriptor_proto::{Label, Type};
    use prost_types::source_code_info::Location;
    use prost_types::{
        EnumValueDescriptorProto, FieldDescriptorProto, MessageOptions, MethodDescriptorProto,
        OneofDescriptorProto, SourceCodeInfo,
    };

    fn field(name: &str, number: i32) -> FieldDescriptorProto {
        FieldDescriptorProto {
            name: Some(name.into()),
            number: Some(number),
            label: Some(Label::Optional as i32),
            r#type: Some(Type::String as i32),
            ..Default::default()
        }
    }
    fn commented(path: &[i32], leading: Option<&str>, trailing: Option<&str>) -> Location {
        Location {
            path: path.to_vec(),
            leading_comments: leading.map(Into::into),
            trailing_comments: trailing.map(Into::into),
            ..Default::default()
        }
    }

    let file = FileDescriptorProto {
        name: Some("lychd/test/v1/test.proto".into()),
        package: Some("lychd.test.v1".into()),
        message_type: vec![DescriptorProto {
            name: Some("Thing".into()),
            field: vec![
                field("documented", 1),
                field("bare", 2),
                field("trailing", 3),
                FieldDescriptorProto {
                    oneof_index: Some(0),
                    ..field("either", 4)
                },
                FieldDescriptorProto {
                    oneof_index: Some(1),
                    proto3_optional: Some(true),
                    ..field("maybe", 5)
                },
            ],
            oneof_decl: vec![
                OneofDescriptorProto {
                    name: Some("choice".into()),
                    ..Default::default()
                },
                OneofDescriptorProto {
                    name: Some("_maybe".into()),
                    ..Default::default()
                },
            ],
            nested_type: vec![
                DescriptorProto {
                    name: Some("Inner".into()),
                    field: vec![field("deep", 1)],
                    ..Default::default()
                },
                DescriptorProto {
                    name: Some("LabelsEntry".into()),
                    field: vec![field("key", 1), field("value", 2)],
                    options: Some(MessageOptions {
                        map_entry: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ],
            enum_type: vec![EnumDescriptorProto {
                name: Some("Mode".into()),
                value: vec![EnumValueDescriptorProto {
                    name: Some("MODE_UNSPECIFIED".into()),
                    number: Some(0),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        enum_type: vec![EnumDescriptorProto {
            name: Some("Color".into()),
            value: vec![
                EnumValueDescriptorProto {
                    name: Some("COLOR_UNSPECIFIED".into()),
                    number: Some(0),
                    ..Default::default()
                },
                EnumValueDescriptorProto {
                    name: Some("COLOR_RED".into()),
                    number: Some(1),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }],
        service: vec![ServiceDescriptorProto {
            name: Some("Things".into()),
            method: vec![
                MethodDescriptorProto {
                    name: Some("Get".into()),
                    input_type: Some(".lychd.test.v1.Thing".into()),
                    output_type: Some(".lychd.test.v1.Thing".into()),
                    ..Default::default()
                },
                MethodDescriptorProto {
                    name: Some("Put".into()),
                    input_type: Some(".lychd.test.v1.Thing".into()),
                    output_type: Some(".lychd.test.v1.Thing".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }],
        source_code_info: Some(SourceCodeInfo {
            location: vec![
                commented(&[4, 0], Some(" A thing.\n"), None),
                commented(&[4, 0, 2, 0], Some(" Documented.\n"), None),
                // `bare` (4, 0, 2, 1) has a location but only blank comments.
                commented(&[4, 0, 2, 1], Some("  \n"), Some("")),
                commented(&[4, 0, 2, 2], None, Some(" Trailing comments count.\n")),
                commented(&[4, 0, 2, 3], Some(" One of the choice.\n"), None),
                // The oneof `choice` (4, 0, 8, 0) has no location.
                commented(&[4, 0, 2, 4], Some(" Maybe.\n"), None),
                // The nested `Inner` (4, 0, 3, 0) is documented, its field is not.
                commented(&[4, 0, 3, 0], Some(" Inner.\n"), None),
                // The nested enum `Mode` (4, 0, 4, 0) is not, its value is.
                commented(&[4, 0, 4, 0, 2, 0], Some(" Unspecified.\n"), None),
                commented(&[5, 0], Some(" Colors.\n"), None),
                commented(&[5, 0, 2, 1], Some(" Red.\n"), None),
                // A detached comment documents nothing.
                Location {
                    path: vec![6, 0],
                    leading_detached_comments: vec![" Detached.\n".into()],
                    ..Default::default()
                },
                commented(&[6, 0, 2, 0], Some(" Get a thing.\n"), None),
            ],
        }),
        ..Default::default()
    };

    assert_eq!(
        undocumented(&file),
        [
            "field lychd.test.v1.Thing.bare",
            "oneof lychd.test.v1.Thing.choice",
            "field lychd.test.v1.Thing.Inner.deep",
            "enum lychd.test.v1.Thing.Mode",
            "enum value lychd.test.v1.Color.COLOR_UNSPECIFIED",
            "service lychd.test.v1.Things",
            "method lychd.test.v1.Things.Put",
        ]
    );

    // Without source info, nothing is documented.
    let bare = FileDescriptorProto {
        source_code_info: None,
        ..file
    };
    assert_eq!(undocumented(&bare).len(), 17);
}
