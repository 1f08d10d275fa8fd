//! Unit tests of the room core's pure parts (the token bucket, attribute updates). Behaviour
//! across participants is tested in virtual time in `crate::sim`.

use super::*;

#[test]
fn a_data_flood_is_cut_at_the_budget_and_the_budget_refills() {
    let start = Instant::now();
    let mut bucket = TokenBucket::new(start);
    let admitted = (0..1000).filter(|_| bucket.admit(start, 100)).count();
    assert_eq!(admitted, DATA_BURST_PACKETS as usize, "the burst, then nothing");
    assert_eq!(bucket.dropped, 1000 - DATA_BURST_PACKETS as u64);
    let later = start + Duration::from_secs(1);
    let refilled = (0..1000).filter(|_| bucket.admit(later, 100)).count();
    assert_eq!(refilled, DATA_PACKETS_PER_SECOND as usize, "one second of rate");
    let mut bytes = TokenBucket::new(start);
    assert!(bytes.admit(start, MAX_DATA_PACKET_BYTES));
    let big = (0..100).filter(|_| bytes.admit(start, MAX_DATA_PACKET_BYTES)).count();
    assert!(big < 40, "the byte budget binds before the packet budget: {big}");
}

fn participant() -> Participant_ {
    Participant_ {
        sid: "PA_x".into(),
        identity: "x".into(),
        frame_identity: Arc::from("x"),
        name: "X".into(),
        metadata: String::new(),
        attributes: BTreeMap::new(),
        kind: ParticipantKind::Standard,
        permissions: Permissions::ALL,
        client_protocol: 0,
        joined_at_ms: 0,
        version: 1,
        state: proto::participant_info::State::Joined,
        tracks: BTreeMap::new(),
        last_reliable_sequence: 0,
        data_budget: TokenBucket::new(Instant::now()),
        body: Body::Local(LocalPeer),
    }
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn attribute_updates_merge_delete_report_changes_and_bump_the_version() {
    let mut p = participant();
    let changed = p.apply_state_update(None, None, attrs(&[("a", "1"), ("b", "2")])).expect("fits");
    assert_eq!(changed, Some(vec!["a".to_owned(), "b".to_owned()]));
    assert_eq!(p.version, 2);
    assert_eq!(p.apply_state_update(None, None, attrs(&[("a", "1")])).expect("fits"), None, "no change");
    assert_eq!(p.version, 2, "no change, no new version");
    let changed = p.apply_state_update(None, None, attrs(&[("a", ""), ("zz", "")])).expect("fits");
    assert_eq!(changed, Some(vec!["a".to_owned()]), "an empty value deletes; deleting nothing is no change");
    assert_eq!(p.attributes, attrs(&[("b", "2")]));
    assert_eq!(p.version, 3);
    let changed = p.apply_state_update(Some("Y".into()), Some("meta".into()), BTreeMap::new()).expect("fits");
    assert_eq!(changed, Some(vec![]));
    assert_eq!((p.name.as_str(), p.metadata.as_str(), p.version), ("Y", "meta", 4));
}

#[test]
fn attributes_beyond_the_limit_are_refused_whole() {
    let mut p = participant();
    let huge = "v".repeat(MAX_PARTICIPANT_STATE_BYTES);
    assert!(p.apply_state_update(None, None, attrs(&[("k", &huge)])).is_err());
    assert!(p.attributes.is_empty());
    assert_eq!(p.version, 1);
}
