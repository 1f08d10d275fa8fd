//! OpenAI Realtime (provider_b, provider_b_mini), xAI (provider_c) and GPT-Live (provider_b_live)
//! against the openai SDK oracle.
