//! The session core under arbitrary client input, on stable and in CI: a deterministic xorshift
//! generator writes programs of operations (raw and chunked data packets, mangled messages, RPC
//! payloads, time, participants, audio, provider events) and every one must hold the properties
//! the cargo-fuzz target `fuzz/fuzz_targets/data_channel.rs` checks (see
//! `tests/support/data_channel.rs` and docs/FUZZING.md).

#[path = "support/data_channel.rs"]
mod data_channel;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn random_programs_hold_every_property() {
    let mut rng = XorShift(0x5eed_cafe_f00d_d00d);
    let mut steps = 0;
    for _ in 0..400 {
        let len = 64 + (rng.next() % 16_000) as usize;
        steps += data_channel::exercise(&rng.bytes(len));
    }
    assert!(steps > 10_000, "the programs run long enough to reach deep states: {steps} operations");
}

#[test]
fn hand_made_programs_hold_every_property() {
    // Op 1 (a framed envelope chunk) again and again from one sender: the budget must hold.
    let mut chunks = Vec::new();
    for envelope in 0u8..40 {
        chunks.extend_from_slice(&[0, 1, envelope, 7, envelope, 0x1f, 0x40]);
        chunks.extend(std::iter::repeat_n(b'x', 8000));
    }
    data_channel::exercise(&chunks);
    // Huge raw packets, time passing, then a flood of provider tool calls with big arguments.
    let mut program = vec![0, 0, 0xff, 0xff];
    program.extend(std::iter::repeat_n(b'{', 2000));
    program.extend_from_slice(&[1, 2, 0x10, 0x00]);
    for n in 0u8..50 {
        program.extend_from_slice(&[0, 5, 5, 0, 0xea, n]);
    }
    data_channel::exercise(&program);
    data_channel::exercise(&[]);
    data_channel::exercise(&[0xff; 4096]);
}
