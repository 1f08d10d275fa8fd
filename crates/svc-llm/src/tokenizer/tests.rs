//! UTF-8-safe streaming and the byte-level alphabet (the tokenizer proper is tested on the real
//! vocabulary in `tests/smollm.rs`).

use super::*;

#[test]
fn a_character_split_over_pushes_comes_out_whole() {
    let text = "héllo wörld, 東京 🎉👍🏽!";
    let bytes = text.as_bytes();
    // Every way of cutting the bytes in two, and one byte at a time.
    for cut in 0..=bytes.len() {
        let mut stream = Utf8Stream::new();
        let (a, b) = bytes.split_at(cut);
        let out = stream.push(a) + &stream.push(b) + &stream.finish();
        assert_eq!(out, text, "cut at {cut}");
    }
    let mut stream = Utf8Stream::new();
    let mut pieces = Vec::new();
    for byte in bytes {
        pieces.push(stream.push(&[*byte]));
    }
    pieces.push(stream.finish());
    assert_eq!(pieces.concat(), text);
    // Nothing was emitted half-way: the emoji's four bytes gave three empty pieces, then itself.
    assert!(pieces.iter().any(|p| p == "🎉"));
    assert!(pieces.iter().filter(|p| p.is_empty()).count() >= bytes.len() - text.chars().count());
}

#[test]
fn bytes_that_can_never_be_text_become_replacement_characters() {
    let mut stream = Utf8Stream::new();
    assert_eq!(stream.push(b"ok \xff x"), "ok \u{fffd} x");
    assert_eq!(stream.push(b"\xe6\x9d"), "");
    // The incomplete character is interrupted by plain text: it can never complete.
    assert_eq!(stream.push(b"a"), "\u{fffd}a");
    assert_eq!(stream.push(b"\xf0\x9f"), "");
    assert_eq!(stream.finish(), "\u{fffd}");
    assert_eq!(stream.finish(), "");
}

#[test]
fn the_byte_level_alphabet_covers_every_byte_once() {
    let map = unicode_to_byte();
    assert_eq!(map.len(), 256);
    let mut bytes: Vec<u8> = map.values().copied().collect();
    bytes.sort_unstable();
    bytes.dedup();
    assert_eq!(bytes.len(), 256);
    // GPT-2's spelling of space, newline and tab, and printable bytes standing for themselves.
    assert_eq!(map[&'Ġ'], b' ');
    assert_eq!(map[&'Ċ'], b'\n');
    assert_eq!(map[&'ĉ'], b'\t');
    assert_eq!(map[&'A'], b'A');
    assert_eq!(map[&'é'], 0xE9);
}
