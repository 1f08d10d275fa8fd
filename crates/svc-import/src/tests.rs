//! End-to-end tests of [`crate::read_import_body`] over in-memory streams.

use std::io::Read as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use futures_util::stream;
use svc_wire::rest::TranscriptRole;

use crate::wav::tests::{sine_wav, wav_with};
use crate::*;

type Chunk = Result<Bytes, io::Error>;

/// A body stream made of `body` cut into `chunk`-byte pieces.
fn chunked(body: &[u8], chunk: usize) -> stream::Iter<std::vec::IntoIter<Chunk>> {
    let chunks: Vec<Chunk> = body.chunks(chunk).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    stream::iter(chunks)
}

fn import_json(audio: Option<&[u8]>, turns: usize) -> String {
    let transcript: Vec<String> = (0..turns)
        .map(|i| format!(r#"{{"ts": {}.25, "role": "{}", "text": "turn {i}"}}"#, 100 + i, ["user", "assistant"][i % 2]))
        .collect();
    let audio = audio.map_or("null".to_owned(), |a| format!(r#""{}""#, STANDARD.encode(a)));
    format!(
        r#"{{"started_at": 100.0, "ended_at": 160.5, "title": "Call", "provider": "p",
            "audio_wav_base64": {audio}, "transcript": [{}]}}"#,
        transcript.join(",")
    )
}

/// Reads `body` spooling to the system temp directory (the spooled files delete themselves).
async fn read(body: &str, chunk: usize, limits: &ImportLimits) -> Result<ImportBody, ImportError> {
    read_import_body(chunked(body.as_bytes(), chunk), &std::env::temp_dir(), limits).await
}

fn file_bytes(audio: &SpooledAudio) -> Vec<u8> {
    let mut bytes = Vec::new();
    audio.file.reopen().expect("reopen").read_to_end(&mut bytes).expect("read spool");
    bytes
}

#[tokio::test]
async fn mono_wav_round_trips_byte_exact() {
    let wav = sine_wav(16_000, 16_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let body = import_json(Some(&wav), 3);
    let import = read_import_body(chunked(body.as_bytes(), 1000), dir.path(), &ImportLimits::default())
        .await
        .expect("valid import");

    let audio = import.audio.expect("audio present");
    assert_eq!(audio.file.path().parent(), Some(dir.path()));
    assert_eq!(file_bytes(&audio), wav);
    assert_eq!(audio.bytes, wav.len() as u64);
    assert_eq!(
        audio.wav,
        WavInfo { sample_rate: 16_000, channels: 1, bits_per_sample: 16, format_tag: 1, data_bytes: 32_000 }
    );
    // The handed-over file reads from its start.
    let mut head = [0; 4];
    audio.file.as_file().read_exact(&mut head).expect("read head");
    assert_eq!(&head, b"RIFF");

    let meta = import.metadata;
    assert_eq!((meta.started_at, meta.ended_at), (100.0, Some(160.5)));
    assert_eq!((meta.title.as_deref(), meta.provider.as_deref()), (Some("Call"), Some("p")));
    assert_eq!(meta.transcript.len(), 3);
    assert_eq!((meta.transcript[1].ts, meta.transcript[1].role), (101.25, TranscriptRole::Assistant));
    assert_eq!(meta.transcript[2].text, "turn 2");
}

#[tokio::test]
async fn absent_or_null_audio_gives_none() {
    let import = read(&import_json(None, 1), 7, &ImportLimits::default()).await.expect("valid");
    assert!(import.audio.is_none());
    let import = read(r#"{"started_at": 1}"#, 3, &ImportLimits::default()).await.expect("valid");
    assert!(import.audio.is_none() && import.metadata.transcript.is_empty());
}

fn wav_reason(result: Result<ImportBody, ImportError>) -> String {
    match result {
        Err(ImportError::InvalidWav(reason)) => reason,
        other => panic!("expected InvalidWav, got {other:?}"),
    }
}

#[tokio::test]
async fn stereo_wav_is_rejected() {
    let stereo = wav_with(1, 2, 16_000, 16, &[], &[0; 400]);
    let reason = wav_reason(read(&import_json(Some(&stereo), 0), 64, &ImportLimits::default()).await);
    assert!(reason.contains("mono"), "{reason}");
}

#[tokio::test]
async fn non_wav_audio_is_rejected() {
    let mp3ish = b"ID3\x04\0\0\0\0\0\0 definitely not a RIFF file".repeat(4);
    let reason = wav_reason(read(&import_json(Some(&mp3ish), 0), 64, &ImportLimits::default()).await);
    assert!(reason.contains("RIFF"), "{reason}");
    let reason = wav_reason(read(&import_json(Some(b"RIFF"), 0), 64, &ImportLimits::default()).await);
    assert!(reason.contains("truncated"), "{reason}");
}

#[tokio::test]
async fn bad_base64_character_is_rejected() {
    let body = import_json(Some(&sine_wav(8_000, 100)), 0).replacen("UklG", "Ukl!", 1);
    assert!(matches!(read(&body, 16, &ImportLimits::default()).await, Err(ImportError::InvalidBase64)));
}

#[tokio::test]
async fn body_over_the_limit_stops_reading() {
    let body = import_json(Some(&sine_wav(8_000, 1000)), 10);
    let limits = ImportLimits { max_body_bytes: 1000, ..ImportLimits::default() };
    // Chunks past the limit are errors: reading one would turn the outcome into `Body`.
    let mut chunks: Vec<Chunk> = body.as_bytes()[..1200].chunks(100).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    chunks.push(Err(io::Error::other("must not be read")));
    let dir = tempfile::tempdir().expect("temp dir");
    let result = read_import_body(stream::iter(chunks), dir.path(), &limits).await;
    assert!(matches!(result, Err(ImportError::BodyTooLarge)), "{result:?}");
    // Exactly at the limit is fine.
    let limits = ImportLimits { max_body_bytes: body.len() as u64, ..ImportLimits::default() };
    read(&body, 100, &limits).await.expect("at the limit");
}

#[tokio::test]
async fn stream_errors_are_body_errors() {
    let chunks: Vec<Chunk> = vec![Ok(Bytes::from_static(b"{\"started_at\"")), Err(io::Error::other("reset"))];
    let dir = tempfile::tempdir().expect("temp dir");
    let result = read_import_body(stream::iter(chunks), dir.path(), &ImportLimits::default()).await;
    assert!(matches!(&result, Err(ImportError::Body(msg)) if msg == "reset"), "{result:?}");
}

#[tokio::test]
async fn decoded_audio_over_the_limit_is_rejected() {
    let wav = sine_wav(8_000, 1000);
    let body = import_json(Some(&wav), 0);
    let limits = ImportLimits { max_audio_bytes: wav.len() as u64 - 1, ..ImportLimits::default() };
    assert!(matches!(read(&body, 500, &limits).await, Err(ImportError::AudioTooLarge)));
    let limits = ImportLimits { max_audio_bytes: wav.len() as u64, ..ImportLimits::default() };
    read(&body, 500, &limits).await.expect("at the limit");
}

#[tokio::test]
async fn too_many_turns_is_rejected_before_validation() {
    // Turn 1 is also invalid: the turn count wins.
    let body = import_json(None, 6).replacen(r#""assistant""#, r#""robot""#, 1);
    let limits = ImportLimits { max_turns: 5, ..ImportLimits::default() };
    assert!(matches!(read(&body, 50, &limits).await, Err(ImportError::TooManyTurns { max: 5 })));
    let limits = ImportLimits { max_turns: 6, ..ImportLimits::default() };
    assert!(matches!(read(&body, 50, &limits).await, Err(ImportError::Validation(_))));
}

#[tokio::test]
async fn every_validation_problem_is_reported_without_echoing_values() {
    let body = r#"{"ended_at": "SECRET-END", "title": "fine",
        "transcript": [
            {"ts": 1, "role": "user", "text": "hello"},
            {"ts": 2, "role": "user", "text": "hi"},
            {"ts": 3, "role": "SECRET-ROLE", "text": "hey"}
        ],
        "SECRET_KEY_x": "SECRET-VALUE"}"#;
    let issues = match read(body, 10, &ImportLimits::default()).await {
        Err(ImportError::Validation(issues)) => issues,
        other => panic!("expected validation issues, got {other:?}"),
    };
    let rendered: Vec<(String, &str)> =
        issues.iter().map(|i| (serde_json::to_string(&i.loc).expect("loc serializes"), i.kind.as_str())).collect();
    assert_eq!(
        rendered,
        [
            (r#"["body","started_at"]"#.to_owned(), "missing"),
            (r#"["body","ended_at"]"#.to_owned(), "float_type"),
            (r#"["body","transcript",2,"role"]"#.to_owned(), "enum"),
            (r#"["body","SECRET_KEY_x"]"#.to_owned(), "extra_forbidden"),
        ]
    );
    for issue in &issues {
        assert!(!issue.msg.contains("SECRET"), "{issue:?}");
    }
    let message = ImportError::Validation(issues).to_string();
    assert!(!message.contains("SECRET"), "{message}");
}

#[tokio::test]
async fn json_errors_point_into_the_body_as_sent() {
    let wav = sine_wav(8_000, 50);
    let body = format!(r#"{{"started_at": 1, "audio_wav_base64": "{}", "title": nul}}"#, STANDARD.encode(&wav));
    let expected = serde_json::from_str::<serde_json::Value>(&body).expect_err("invalid");
    match read(&body, 33, &ImportLimits::default()).await {
        Err(ImportError::InvalidJson { line, column, category }) => {
            assert_eq!((line, column, category), (expected.line(), expected.column(), "syntax"));
        }
        other => panic!("expected InvalidJson, got {other:?}"),
    }
    // A body cut inside the audio string is a JSON problem, not a WAV problem.
    let cut = &body[..body.find("AAAA").expect("the audio has runs of zero bits") + 2];
    assert!(matches!(
        read(cut, 33, &ImportLimits::default()).await,
        Err(ImportError::InvalidJson { category: "eof", .. })
    ));
}

#[tokio::test]
async fn large_rest_spills_to_disk_and_still_parses() {
    let wav = sine_wav(8_000, 500);
    let body = import_json(Some(&wav), 400);
    let dir = tempfile::tempdir().expect("temp dir");
    let limits = ImportLimits::default();
    let config = Config { rest_memory_limit: 1024, feed_slice: 100 };
    let (import, stats) = read_with(chunked(body.as_bytes(), 333), dir.path(), &limits, &config).await.expect("valid");
    assert!(stats.rest_spilled);
    assert_eq!(import.metadata.transcript.len(), 400);
    assert_eq!(import.metadata.transcript[399].text, "turn 399");
    let audio = import.audio.expect("audio");
    assert_eq!(file_bytes(&audio), wav);
    // The spilled rest is gone; only the audio remains in the spool directory.
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);

    // The same body under the default limit stays in memory.
    let (_, stats) =
        read_with(chunked(body.as_bytes(), 333), dir.path(), &limits, &Config::default()).await.expect("valid");
    assert!(!stats.rest_spilled);

    // Errors in a spilled rest are still positioned in the body.
    let bad = body.replacen("\"turn 399\"", "\"turn 399\",", 1);
    let expected = serde_json::from_str::<serde_json::Value>(&bad).expect_err("invalid");
    let result = read_with(chunked(bad.as_bytes(), 333), dir.path(), &limits, &config).await;
    assert!(
        matches!(result, Err(ImportError::InvalidJson { line, column, .. })
            if (line, column) == (expected.line(), expected.column())),
        "{:?}",
        result.map(|_| ())
    );
}

#[tokio::test]
async fn forty_megabyte_audio_in_64_kib_chunks_is_byte_exact() {
    // Arbitrary sample data after a valid header: the payload is not inspected.
    let mut state = 0x1234_5678_9ABC_DEF0_u64;
    let samples: Vec<u8> = (0..40 * 1024 * 1024 / 8)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()
        })
        .collect();
    let wav = wav_with(1, 1, 48_000, 16, &[], &samples);
    let body = import_json(Some(&wav), 2);
    let import = read(&body, 64 * 1024, &ImportLimits::default()).await.expect("valid");
    let audio = import.audio.expect("audio");
    assert_eq!(audio.bytes, wav.len() as u64);
    assert_eq!(audio.wav.data_bytes, samples.len() as u64);
    assert!(file_bytes(&audio) == wav, "spooled audio differs");
}
