//! Runs the fake upstream on its own, for trying `svc serve` without a provider key:
//!
//! ```sh
//! cargo run -p svc-testkit --bin fake-upstream -- [--flavor openai|xai]
//! ```
//!
//! It prints the environment `svc serve` needs to reach it (every provider family points at the
//! same fake) and answers every turn with the default reply until interrupted. With
//! `SVC_FAKE_WIRE_SEED=<n>` in its environment it sends on the randomized wire (the crate docs).

use svc_testkit::{FAKE_API_KEY, FakeUpstream, Flavor};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut flavor = Flavor::OpenAi;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--flavor" => match args.next().as_deref() {
                Some("openai") => flavor = Flavor::OpenAi,
                Some("xai") => flavor = Flavor::Xai,
                other => {
                    eprintln!("fake-upstream: --flavor takes openai or xai, not {other:?}");
                    std::process::exit(64);
                }
            },
            other => {
                eprintln!("fake-upstream: unknown argument {other:?}; usage: fake-upstream [--flavor openai|xai]");
                std::process::exit(64);
            }
        }
    }
    let fake = FakeUpstream::start(flavor).await;
    println!("OPENAI_API_KEY={FAKE_API_KEY}");
    println!("OPENAI_BASE_URL={}", fake.openai_base_url());
    println!("XAI_API_KEY={FAKE_API_KEY}");
    println!("XAI_BASE_URL={}", fake.openai_base_url());
    println!("GEMINI_API_KEY={FAKE_API_KEY}");
    println!("GOOGLE_GEMINI_BASE_URL={}", fake.gemini_base_url());
    let _ = tokio::signal::ctrl_c().await;
}
