use super::*;

fn wav_bytes(sample_rate: u32, channels: u16, samples: &[i16]) -> Vec<u8> {
    let mut bytes = Vec::new();
    write_wav(&mut bytes, sample_rate, channels, samples).expect("writes");
    bytes
}

/// A WAV file assembled from raw chunks, for headers no sane writer produces.
fn riff(chunks: &[(&[u8; 4], &[u8])]) -> Vec<u8> {
    let mut body = b"WAVE".to_vec();
    for (id, data) in chunks {
        body.extend_from_slice(*id);
        body.extend_from_slice(&(data.len() as u32).to_le_bytes());
        body.extend_from_slice(data);
        if data.len() % 2 == 1 {
            body.push(0);
        }
    }
    let mut bytes = b"RIFF".to_vec();
    bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&body);
    bytes
}

fn fmt(format_tag: u16, channels: u16, sample_rate: u32, bits: u16) -> Vec<u8> {
    let block_align = channels * bits / 8;
    let mut fmt = Vec::new();
    fmt.extend_from_slice(&format_tag.to_le_bytes());
    fmt.extend_from_slice(&channels.to_le_bytes());
    fmt.extend_from_slice(&sample_rate.to_le_bytes());
    fmt.extend_from_slice(&(sample_rate * u32::from(block_align)).to_le_bytes());
    fmt.extend_from_slice(&block_align.to_le_bytes());
    fmt.extend_from_slice(&bits.to_le_bytes());
    fmt
}

fn pcm_bytes(samples: &[i16]) -> Vec<u8> {
    samples.iter().flat_map(|s| s.to_le_bytes()).collect()
}

#[test]
fn written_files_read_back_identically() {
    let samples: Vec<i16> = (0..4_801).map(|n| ((n * 37) % 65_536 - 32_768) as i16).collect();
    let bytes = wav_bytes(48_000, 1, &samples);
    assert_eq!(bytes.len(), 44 + 2 * samples.len());
    assert_eq!(&bytes[..4], b"RIFF");
    let wav = read_wav(&bytes).expect("reads");
    assert_eq!(wav, Wav { sample_rate: 48_000, channels: 1, samples: samples.clone() });
    assert_eq!(wav.frames(), 4_801);
    assert_eq!(wav.duration(), Duration::from_secs_f64(4_801.0 / 48_000.0));

    let stereo: Vec<i16> = samples[..4_800].to_vec();
    let wav = read_wav(&wav_bytes(16_000, 2, &stereo)).expect("reads");
    assert_eq!((wav.sample_rate, wav.channels, wav.frames()), (16_000, 2, 2_400));
    assert_eq!(wav.samples, stereo);
}

#[test]
fn files_round_trip_through_the_file_system() {
    let path = std::env::temp_dir().join(format!("svc-audio-wav-{}.wav", std::process::id()));
    write_wav_file(&path, 24_000, 1, &[1, -2, 3]).expect("writes");
    let wav = read_wav_file(&path).expect("reads");
    std::fs::remove_file(&path).expect("removes");
    assert_eq!(wav.samples, [1, -2, 3]);
    assert!(matches!(read_wav_file(&path), Err(AudioError::Io(_))));
}

#[test]
fn to_mono_averages_channels() {
    let wav =
        Wav { sample_rate: 48_000, channels: 2, samples: vec![100, 300, -32_768, -32_768, 32_767, 32_767, 1, -2] };
    assert_eq!(wav.to_mono(), [200, -32_768, 32_767, 0]);
    let mono = Wav { sample_rate: 48_000, channels: 1, samples: vec![5, 6] };
    assert_eq!(mono.to_mono(), [5, 6]);
}

#[test]
fn other_chunks_are_skipped_wherever_they_are() {
    let samples = [10_i16, -20, 30];
    let info = b"INFOISFT\x07\0\0\0espeak\0";
    let bytes = riff(&[
        (b"LIST", info),
        (b"fmt ", &fmt(1, 1, 22_050, 16)),
        (b"fact", &[1, 2, 3]),
        (b"data", &pcm_bytes(&samples)),
        (b"LIST", info),
    ]);
    let wav = read_wav(&bytes).expect("reads");
    assert_eq!((wav.sample_rate, wav.samples.as_slice()), (22_050, &samples[..]));
}

#[test]
fn extensible_pcm16_is_read_and_other_formats_are_refused() {
    let mut extensible = fmt(0xFFFE, 1, 48_000, 16);
    extensible.extend_from_slice(&22_u16.to_le_bytes());
    extensible.extend_from_slice(&16_u16.to_le_bytes());
    extensible.extend_from_slice(&4_u32.to_le_bytes());
    extensible.extend_from_slice(&1_u16.to_le_bytes());
    extensible.extend_from_slice(b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xAA\x00\x38\x9B\x71");
    let wav = read_wav(&riff(&[(b"fmt ", &extensible), (b"data", &pcm_bytes(&[7]))])).expect("reads");
    assert_eq!(wav.samples, [7]);

    for (tag, bits, want) in [(3, 32, (3, 32)), (1, 8, (1, 8)), (1, 24, (1, 24)), (6, 8, (6, 8))] {
        let bytes = riff(&[(b"fmt ", &fmt(tag, 1, 8_000, bits)), (b"data", &[0; 12])]);
        match read_wav(&bytes) {
            Err(AudioError::WavUnsupported { format_tag, bits_per_sample }) => {
                assert_eq!((format_tag, bits_per_sample), want);
            }
            other => panic!("tag {tag}, {bits} bits: {other:?}"),
        }
    }
}

#[test]
fn a_streaming_placeholder_size_means_the_data_runs_to_the_end() {
    // What `espeak-ng --stdout` writes: RIFF and data sizes it could not seek back to fix.
    let mut bytes = riff(&[(b"fmt ", &fmt(1, 1, 22_050, 16)), (b"data", &pcm_bytes(&[1, 2, 3, 4]))]);
    bytes[4..8].copy_from_slice(&0x7FFF_F024_u32.to_le_bytes());
    let data_size_at = bytes.len() - 8 - 4;
    bytes[data_size_at..data_size_at + 4].copy_from_slice(&0x7FFF_F000_u32.to_le_bytes());
    assert_eq!(read_wav(&bytes).expect("reads").samples, [1, 2, 3, 4]);
    bytes[data_size_at..data_size_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(read_wav(&bytes).expect("reads").samples, [1, 2, 3, 4]);
}

#[test]
fn truncated_and_inconsistent_files_are_typed_errors() {
    let good = wav_bytes(48_000, 1, &[1, 2, 3, 4]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("not RIFF", b"RIFX\0\0\0\0WAVEfmt ".to_vec()),
        ("not WAVE", b"RIFF\0\0\0\0AVI fmt ".to_vec()),
        ("header only", good[..12].to_vec()),
        ("cut in fmt", good[..30].to_vec()),
        ("cut in data", good[..49].to_vec()),
        ("odd data", riff(&[(b"fmt ", &fmt(1, 1, 8_000, 16)), (b"data", &[1, 2, 3])])),
        ("partial stereo frame", riff(&[(b"fmt ", &fmt(1, 2, 8_000, 16)), (b"data", &[1, 2, 3, 4, 5, 6])])),
        ("no fmt", riff(&[(b"data", &[1, 2])])),
        ("no data", riff(&[(b"fmt ", &fmt(1, 1, 8_000, 16))])),
        ("two fmt", riff(&[(b"fmt ", &fmt(1, 1, 8_000, 16)), (b"fmt ", &fmt(1, 1, 8_000, 16)), (b"data", &[])])),
        ("zero channels", riff(&[(b"fmt ", &fmt(1, 0, 8_000, 16)), (b"data", &[])])),
        ("zero rate", riff(&[(b"fmt ", &fmt(1, 1, 0, 16)), (b"data", &[])])),
        ("short fmt", riff(&[(b"fmt ", &[1, 0, 1, 0]), (b"data", &[])])),
    ];
    for (name, bytes) in cases {
        match read_wav(&bytes) {
            Err(
                AudioError::NotWav { .. }
                | AudioError::WavTruncated { .. }
                | AudioError::WavMalformed { .. }
                | AudioError::WavUnsupported { .. },
            ) => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    // Block size that contradicts the channel count.
    let mut bad_align = fmt(1, 2, 8_000, 16);
    bad_align[12] = 2;
    assert!(matches!(read_wav(&riff(&[(b"fmt ", &bad_align), (b"data", &[])])), Err(AudioError::WavMalformed { .. })));
}

#[test]
fn absurd_sizes_and_corrupted_bytes_never_panic() {
    // A chunk claiming 4 GiB.
    let mut bytes = b"RIFF\xFF\xFF\xFF\xFFWAVELIST\xFF\xFF\xFF\xFF".to_vec();
    bytes.extend_from_slice(&[0; 64]);
    assert!(matches!(read_wav(&bytes), Err(AudioError::WavTruncated { .. })));
    // Every prefix and every single-byte corruption of a small file either reads or errors.
    let good =
        riff(&[(b"LIST", b"INFO"), (b"fmt ", &fmt(1, 2, 8_000, 16)), (b"data", &pcm_bytes(&[1, 2, 3, 4, 5, 6]))]);
    for len in 0..good.len() {
        let _ = read_wav(&good[..len]);
    }
    for at in 0..good.len() {
        for value in [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF] {
            let mut corrupted = good.clone();
            corrupted[at] = value;
            if let Ok(wav) = read_wav(&corrupted) {
                assert!(wav.samples.len() <= corrupted.len() / 2);
                assert_eq!(wav.samples.len() % usize::from(wav.channels), 0);
            }
        }
    }
}

#[test]
fn writing_refuses_what_a_wav_cannot_describe() {
    let mut sink = Vec::new();
    assert!(matches!(write_wav(&mut sink, 48_000, 0, &[]), Err(AudioError::WavMalformed { .. })));
    assert!(matches!(write_wav(&mut sink, 0, 1, &[]), Err(AudioError::WavMalformed { .. })));
    assert!(matches!(write_wav(&mut sink, 48_000, 2, &[1, 2, 3]), Err(AudioError::WavMalformed { .. })));
    assert!(matches!(write_wav(&mut sink, u32::MAX, 2, &[]), Err(AudioError::WavMalformed { .. })));
    assert!(sink.is_empty());
    // An empty recording is a valid file.
    write_wav(&mut sink, 48_000, 1, &[]).expect("writes");
    assert_eq!(read_wav(&sink).expect("reads").samples, []);
}
