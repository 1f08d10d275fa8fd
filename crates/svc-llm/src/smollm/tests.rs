//! The load-time re-quantization, checked against candle's own Q4_1 → f32 → Q8_0 path.

use super::*;
use crate::sampler::SplitMix64;
use candle_core::quantized::QTensor;
use candle_core::quantized::ggml_file::qtensor_from_ggml;

/// `blocks` random Q4_1 blocks with realistic scales (d and m as f16).
fn random_q4_1(blocks: usize, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed);
    let mut raw = Vec::with_capacity(blocks * Q4_1_BLOCK);
    for i in 0..blocks {
        let d = (rng.next_f64() * 0.05) as f32;
        // Some blocks all positive, some all negative, most spanning zero; one all zero.
        let m = if i == 3 { 0.0 } else { -(rng.next_f64() * 0.5) as f32 + if i % 7 == 0 { 0.6 } else { 0.0 } };
        let d = if i == 3 { 0.0 } else { d };
        raw.extend_from_slice(&half::f16::from_f32(d).to_le_bytes());
        raw.extend_from_slice(&half::f16::from_f32(m).to_le_bytes());
        raw.extend((0..16).map(|_| (rng.next_u64() & 0xFF) as u8));
    }
    raw
}

#[test]
fn q4_1_to_q8_0_matches_candle_and_keeps_the_values() {
    let (rows, cols) = (8, 32 * 6);
    let raw = random_q4_1(rows * cols / 32, 5);
    let mut mine = Vec::new();
    q4_1_to_q8_0(&raw, &mut mine);
    assert_eq!(mine.len(), raw.len() / Q4_1_BLOCK * 34);

    let cpu = Device::Cpu;
    let q4_1 = qtensor_from_ggml(GgmlDType::Q4_1, &raw, vec![rows, cols], &cpu).expect("q4_1 tensor");
    let exact = q4_1.dequantize(&cpu).expect("dequantize").flatten_all().expect("flat").to_vec1::<f32>().expect("vec");
    let candle = QTensor::quantize(&q4_1.dequantize(&cpu).expect("dequantize"), GgmlDType::Q8_0).expect("quantize");
    assert_eq!(mine, candle.data().expect("bytes").as_ref(), "same bytes as candle's own conversion");

    let q8_0 = qtensor_from_ggml(GgmlDType::Q8_0, &mine, vec![rows, cols], &cpu).expect("q8_0 tensor");
    let approx = q8_0.dequantize(&cpu).expect("dequantize").flatten_all().expect("flat").to_vec1::<f32>().expect("vec");
    for (block, (a, b)) in exact.chunks(32).zip(approx.chunks(32)).enumerate() {
        let amax = a.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (x, y) in a.iter().zip(b) {
            // Half a Q8_0 step, plus up to 127 times the f16 rounding of the step (2^-11 of it).
            assert!((x - y).abs() <= amax / 127.0 * 0.57 + 1e-6, "block {block}: {x} vs {y}");
        }
    }
}
