use super::*;

#[test]
fn every_kind_has_one_stored_name_that_parses_back() {
    let names: std::collections::BTreeSet<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), Kind::ALL.len());
    for k in Kind::ALL {
        assert_eq!(Kind::parse(k.name()), Some(k));
        // The migration's check on `run_inputs.kind`.
        assert!(
            k.name().len() <= 32 && k.name().chars().all(|c| c.is_ascii_lowercase() || c == '_')
        );
    }
    assert_eq!(Kind::parse("effect_response"), None);
}

#[test]
fn inputs_carry_their_fields_and_a_response_its_bytes() {
    let c = Input::clock_loop(1_700_000_000_123_456_789, 1_700_000_000_000_000_000);
    assert_eq!(c.kind, Kind::Clock);
    assert_eq!(c.str("read"), Some("loop"));
    assert_eq!(c.i64("now_ns"), Some(1_700_000_000_123_456_789));
    assert_eq!(c.i64("wait_from_ns"), Some(1_700_000_000_000_000_000));
    assert_eq!(Input::random(7).u64("seed"), Some(7));
    let m = Input::model_response(b"{}".to_vec(), "l-1", 5);
    assert_eq!(
        (m.body.as_slice(), m.u64("price_milli_per_1k")),
        (&b"{}"[..], Some(5))
    );
    assert_eq!(Input::failed(true).str("failure"), Some("permanent"));
    assert_eq!(Input::cold(2000).u64("wait_ms"), Some(2000));
    assert!(Input::tree([1; 9], [0; 4]).meta["budgets"].is_array());
}
