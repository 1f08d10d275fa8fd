//! The sampler: greedy, penalties, truncation, and reproducibility.

use super::*;

fn params(temperature: f32, top_p: f32, top_k: u32, repeat_penalty: f32, seed: u64) -> GenerateParams {
    GenerateParams { max_tokens: 1, temperature, top_p, top_k, repeat_penalty, seed, ..GenerateParams::default() }
}

#[test]
fn zero_temperature_is_argmax() {
    let mut sampler = Sampler::new(&params(0.0, 1.0, 0, 1.0, 1));
    let mut logits = vec![0.1, 2.0, -1.0, 1.9];
    assert_eq!(sampler.sample(&mut logits, &[], |_| false), 1);
    assert_eq!(argmax(&[1.0, 3.0, 3.0]), 1);
}

#[test]
fn the_repeat_penalty_applies_to_recent_tokens_but_not_exempt_ones() {
    let mut sampler = Sampler::new(&params(0.0, 1.0, 0, 2.0, 1));
    let mut logits = vec![0.0, 2.0, 1.5, -1.0];
    // Token 1 was just said: 2.0 / 2 = 1.0 < 1.5.
    assert_eq!(sampler.sample(&mut logits, &[1], |_| false), 2);
    let mut logits = vec![0.0, 2.0, 1.5, -1.0];
    assert_eq!(sampler.sample(&mut logits, &[1], |id| id == 1), 1);
    // Negative logits are multiplied, pushing them further down.
    let mut logits = vec![-1.0, -1.5];
    assert_eq!(sampler.sample(&mut logits, &[0], |_| false), 1);
    // Only the last REPEAT_WINDOW tokens count.
    let mut recent = vec![1];
    recent.extend(std::iter::repeat_n(3, REPEAT_WINDOW));
    let mut logits = vec![0.0, 2.0, 1.5, -1.0];
    assert_eq!(sampler.sample(&mut logits, &recent, |_| false), 1);
}

#[test]
fn top_k_one_and_tiny_top_p_are_greedy() {
    let logits = vec![0.5, 1.0, 3.0, 2.9, -2.0];
    for seed in 0..50 {
        let mut k1 = Sampler::new(&params(1.5, 1.0, 1, 1.0, seed));
        assert_eq!(k1.sample(&mut logits.clone(), &[], |_| false), 2);
        let mut p0 = Sampler::new(&params(1.5, 1e-6, 0, 1.0, seed));
        assert_eq!(p0.sample(&mut logits.clone(), &[], |_| false), 2);
    }
}

#[test]
fn top_p_excludes_the_tail() {
    // Probabilities at temperature 1: about 0.665, 0.245, 0.090 (for 2, 1, 0); top_p 0.8 keeps
    // only tokens 2 and 1.
    let logits = vec![0.0, 1.0, 2.0];
    let mut sampler = Sampler::new(&params(1.0, 0.8, 0, 1.0, 3));
    for _ in 0..2000 {
        assert_ne!(sampler.sample(&mut logits.clone(), &[], |_| false), 0);
    }
}

#[test]
fn draws_follow_the_distribution_and_the_seed() {
    let logits = vec![0.0, 1.0, 2.0];
    let draw = |seed| {
        let mut sampler = Sampler::new(&params(1.0, 1.0, 0, 1.0, seed));
        (0..3000).map(|_| sampler.sample(&mut logits.clone(), &[], |_| false)).collect::<Vec<u32>>()
    };
    let a = draw(11);
    assert_eq!(a, draw(11), "same seed, same draws");
    assert_ne!(a, draw(12), "another seed, other draws");
    let share = |id| a.iter().filter(|&&x| x == id).count() as f64 / a.len() as f64;
    assert!((share(2) - 0.665).abs() < 0.04, "{}", share(2));
    assert!((share(1) - 0.245).abs() < 0.04, "{}", share(1));
    assert!((share(0) - 0.090).abs() < 0.03, "{}", share(0));
}

#[test]
fn splitmix_is_stable() {
    // Reference values of SplitMix64 from seed 0: the sequence must never change between builds.
    let mut rng = SplitMix64::new(0);
    assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    let x = rng.next_f64();
    assert!((0.0..1.0).contains(&x));
}

#[test]
fn no_repeat_ngram_bans_the_token_that_would_say_an_ngram_again() {
    // "a b c x a b" → c would repeat "a b c".
    assert_eq!(ngram_bans(&[1, 2, 3, 9, 1, 2], 3), vec![3]);
    // Every earlier continuation of the prefix is banned.
    let mut bans = ngram_bans(&[1, 2, 3, 1, 2, 4, 1, 2], 3);
    bans.sort_unstable();
    assert_eq!(bans, vec![3, 4]);
    // Nothing to repeat, too short, or off.
    assert!(ngram_bans(&[1, 2, 3, 4], 3).is_empty());
    assert!(ngram_bans(&[1, 2], 3).is_empty());
    assert!(ngram_bans(&[1, 2, 3, 1, 2], 0).is_empty());
    // n = 1 bans every token already said.
    let mut once = ngram_bans(&[5, 6, 5], 1);
    once.sort_unstable();
    once.dedup();
    assert_eq!(once, vec![5, 6]);
}
