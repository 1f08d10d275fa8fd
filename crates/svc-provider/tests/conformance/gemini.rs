//! Gemini Live (provider_a) against the google-genai oracle.
