//! Opus encode and decode, mono, in 20 ms frames: the room's 48 kHz, or any rate libopus runs at
//! natively (8, 12, 16, 24 kHz) so that the session runtime can decode a user's audio straight to
//! a provider's input rate and encode a provider's 24 kHz speech without a resampler in between.
//! The Opus bitstream does not depend on the rate the encoder was fed (RTP timestamps stay on the
//! 48 kHz clock, RFC 7587), so a packet encoded from 24 kHz decodes at 48 kHz and the reverse.
//!
//! Thin, allocation-aware wrappers over libopus (the system library, through the `opus` crate)
//! that turn every libopus failure into an [`AudioError`] and guard the two things libopus leaves
//! to its caller: output buffers big enough for any packet, and concealment lengths that are a
//! multiple of 2.5 ms and small enough for libopus's stack-allocated scratch space.

use svc_opus::Application;

use crate::{AudioError, SAMPLE_RATE_HZ};

/// Output buffer for one encoded frame. A one-frame Opus packet is at most 1 + 1275 bytes
/// (RFC 6716 §3.2.1), so this never limits the encoder; it only has to be big enough.
const MAX_PACKET_BYTES: usize = 1500;

/// The longest packet Opus allows: 120 ms at 48 kHz (RFC 6716 §3.2.5).
pub const MAX_PACKET_SAMPLES: usize = 5760;

/// Concealment (PLC) and FEC work in steps of 2.5 ms; libopus rejects other lengths.
const CONCEAL_STEP_SAMPLES: usize = 120;

/// Most samples [`OpusDecoder::conceal`] and [`OpusDecoder::decode_fec`] fill in one call (1 s).
///
/// Concealment fades to silence within about 100 ms, so a longer gap is no longer a loss to hide
/// but a pause; the bound keeps a hostile length from becoming a huge allocation.
pub const MAX_CONCEAL_SAMPLES: usize = 48_000;

/// Sample rates libopus encodes and decodes natively.
pub const OPUS_RATES_HZ: [u32; 5] = [8_000, 12_000, 16_000, 24_000, 48_000];

/// Samples in one 20 ms frame at `rate_hz`.
#[must_use]
pub const fn frame_samples_at(rate_hz: u32) -> usize {
    (rate_hz / 50) as usize
}

fn check_rate(rate_hz: u32) -> Result<u32, AudioError> {
    if OPUS_RATES_HZ.contains(&rate_hz) { Ok(rate_hz) } else { Err(AudioError::UnsupportedRate { rate_hz }) }
}

/// Which libopus application profile the encoder uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpusApplication {
    /// `OPUS_APPLICATION_VOIP`: for microphone speech. Adds a high-pass filter that follows the
    /// talker's pitch (60–100 Hz cutoff) to remove hum and breath noise; its phase shift near the
    /// fundamental of low voices makes the decoded waveform differ visibly from the input.
    Voip,
    /// `OPUS_APPLICATION_AUDIO`: decoded audio as close to the input as the bitrate allows (only a
    /// 3 Hz DC filter). With [`EncoderConfig::VOICE`]'s voice signal hint it still codes speech in
    /// the SILK/hybrid modes, so in-band FEC works the same.
    Audio,
}

/// Settings for [`OpusEncoder::with_config`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderConfig {
    /// libopus application profile.
    pub application: OpusApplication,
    /// Target bitrate in bits per second (libopus accepts 500..=512_000).
    pub bitrate_bps: i32,
    /// Encoder complexity, 0 (cheapest) ..= 10 (best).
    pub complexity: i32,
    /// Whether to embed a low-bitrate copy of each frame in the next packet (in-band FEC), so a
    /// receiver can recover a single lost packet with [`OpusDecoder::decode_fec`].
    pub inband_fec: bool,
    /// Packet loss the encoder should expect, 0..=100. libopus produces in-band FEC only when
    /// this is above zero, and at 5 or less drops it whenever the bitrate is short; higher values
    /// spend more bits on the redundant copy.
    pub expected_loss_percent: i32,
}

impl EncoderConfig {
    /// The room's speech settings. Figures are from `examples/opus_cost.rs` (release, libopus
    /// 1.3.1, the project's shared 2-core machine, 7 s of espeak-ng speech; "correlation" is
    /// [`crate::analysis::best_correlation`] of the decoded audio with the input).
    ///
    /// - [`OpusApplication::Audio`] with the voice signal hint: what this encoder publishes is
    ///   the agent's synthesized speech, already clean, so the VoIP profile's noise high-pass only
    ///   costs fidelity: correlation 0.967 against 0.941 under VoIP, and 0.994 against 0.836 on
    ///   the crate's low-pitched test signal. The room's tests compare received audio with what
    ///   was sent at a 0.9 threshold.
    /// - 40 kbit/s, the top of RFC 7587 §3.1.1's 28–40 kbit/s for full-band speech: libopus
    ///   discounts the bitrate for a cheap complexity and for the FEC copy, and at 32 kbit/s
    ///   narrows the audio to wideband (8 kHz) to keep FEC. At 40 kbit/s it codes full band.
    /// - Complexity 1: see [`EncoderConfig::VOICE_COMPLEXITY`].
    /// - In-band FEC with 10 % expected loss: a lost packet is recovered from the next one
    ///   (the recovered frame correlates 0.90 with the lost one on speech, 0.98 on the test
    ///   signal) instead of extrapolated (0.41, 0.6). The copy costs about 8 µs per frame and
    ///   lowers loss-free correlation from 0.982 to 0.967. Keep the loss above 5 %: at 5 % or
    ///   less libopus drops FEC altogether when bits are short, and at 40 kbit/s and complexity 1
    ///   they are.
    pub const VOICE: Self = Self {
        application: OpusApplication::Audio,
        bitrate_bps: 40_000,
        complexity: Self::VOICE_COMPLEXITY,
        inband_fec: true,
        expected_loss_percent: 10,
    };

    /// Complexity of [`EncoderConfig::VOICE`], chosen for CPU.
    ///
    /// Encoding a 20 ms frame costs about 70 µs at complexity 0–1, 125 µs at 2–3 (SILK's
    /// quantiser keeps two candidate paths), 155 µs at 4–5 (and shapes its noise perceptually),
    /// 215 µs at 6 and 310 µs at 8–10; decoding costs about 28 µs whatever the complexity. The
    /// correlation of decoded speech with its input moves from 0.967 (1) to 0.979 (3), 0.982
    /// (5) and 0.984 (10). The GUIDE's 200 full-duplex sessions on 2 cores leave 200 µs of CPU
    /// per session per 20 ms for *everything*: Opus both ways takes about 105 µs of it at
    /// complexity 1, 185 µs at 5. Deployments with CPU to spare can raise it through
    /// [`OpusEncoder::with_config`].
    pub const VOICE_COMPLEXITY: i32 = 1;
}

impl Default for EncoderConfig {
    fn default() -> Self {
        Self::VOICE
    }
}

/// Encodes 20 ms frames of mono PCM16 into Opus packets (48 kHz unless built
/// [`OpusEncoder::with_rate`]).
///
/// One encoder per outgoing stream: the encoder carries state from frame to frame.
pub struct OpusEncoder {
    inner: svc_opus::Encoder,
    /// Samples per 20 ms frame at the input rate.
    frame_samples: usize,
    /// Samples by which the decoded output lags the input (libopus's look-ahead), read once at
    /// construction because libopus only reports it through a `&mut` control call.
    lookahead_samples: usize,
}

impl std::fmt::Debug for OpusEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpusEncoder")
            .field("frame_samples", &self.frame_samples)
            .field("lookahead_samples", &self.lookahead_samples)
            .finish_non_exhaustive()
    }
}

impl OpusEncoder {
    /// An encoder with [`EncoderConfig::VOICE`]: mono, 48 kHz, speech at 32 kbit/s with FEC.
    ///
    /// # Errors
    ///
    /// [`AudioError::Codec`] if libopus cannot create or configure the encoder.
    pub fn new_voice() -> Result<Self, AudioError> {
        Self::with_config(EncoderConfig::VOICE)
    }

    /// An encoder with the given settings (always mono, 48 kHz, voice signal hint).
    ///
    /// # Errors
    ///
    /// [`AudioError::Codec`] if libopus cannot create the encoder or rejects a setting.
    pub fn with_config(config: EncoderConfig) -> Result<Self, AudioError> {
        Self::with_rate(config, SAMPLE_RATE_HZ)
    }

    /// An encoder fed PCM at `rate_hz` (one of [`OPUS_RATES_HZ`]), e.g. a provider's 24 kHz
    /// speech: libopus codes it natively, which costs less than resampling to 48 kHz first and
    /// loses nothing (the speech holds nothing above 12 kHz).
    ///
    /// # Errors
    ///
    /// [`AudioError::UnsupportedRate`] for another rate; [`AudioError::Codec`] as
    /// [`OpusEncoder::with_config`].
    pub fn with_rate(config: EncoderConfig, rate_hz: u32) -> Result<Self, AudioError> {
        let rate_hz = check_rate(rate_hz)?;
        let opus = |error: svc_opus::Error| AudioError::from_opus(&error);
        let application = match config.application {
            OpusApplication::Voip => Application::Voip,
            OpusApplication::Audio => Application::Audio,
        };
        let mut inner = svc_opus::Encoder::new(rate_hz, application).map_err(opus)?;
        inner.set_bitrate(config.bitrate_bps).map_err(opus)?;
        inner.set_complexity(config.complexity).map_err(opus)?;
        inner.set_signal_voice().map_err(opus)?;
        inner.set_inband_fec(config.inband_fec).map_err(opus)?;
        inner.set_packet_loss_perc(config.expected_loss_percent).map_err(opus)?;
        // No DTX: the pacer already stops sending when there is nothing to say, and DTX's
        // comfort-noise packets would make a silent frame cost a decoder call at the far end.
        inner.set_dtx(false).map_err(opus)?;
        let lookahead = inner.lookahead().map_err(opus)?;
        let lookahead_samples = usize::try_from(lookahead).unwrap_or(0);
        Ok(Self { inner, frame_samples: frame_samples_at(rate_hz), lookahead_samples })
    }

    /// Samples of one 20 ms frame at this encoder's rate ([`crate::FRAME_SAMPLES`] at 48 kHz).
    #[must_use]
    pub fn frame_samples(&self) -> usize {
        self.frame_samples
    }

    /// Encodes one frame of exactly [`OpusEncoder::frame_samples`] samples into a new packet.
    ///
    /// # Errors
    ///
    /// [`AudioError::FrameLength`] for any other length; [`AudioError::Codec`] if libopus fails.
    pub fn encode_frame(&mut self, pcm: &[i16]) -> Result<Vec<u8>, AudioError> {
        let mut packet = Vec::new();
        self.encode_frame_into(pcm, &mut packet)?;
        Ok(packet)
    }

    /// Encodes one frame into `packet`, replacing its contents; reuse one `Vec` across frames so
    /// the hot path does not allocate.
    ///
    /// # Errors
    ///
    /// As [`OpusEncoder::encode_frame`]; on error `packet` is left empty.
    pub fn encode_frame_into(&mut self, pcm: &[i16], packet: &mut Vec<u8>) -> Result<(), AudioError> {
        packet.clear();
        if pcm.len() != self.frame_samples {
            return Err(AudioError::FrameLength { expected: self.frame_samples, actual: pcm.len() });
        }
        packet.resize(MAX_PACKET_BYTES, 0);
        match self.inner.encode(pcm, packet) {
            Ok(len) => {
                packet.truncate(len);
                Ok(())
            }
            Err(error) => {
                packet.clear();
                Err(AudioError::from_opus(&error))
            }
        }
    }

    /// Samples (at the input rate) by which decoded audio lags the encoded input: 312 (6.5 ms)
    /// at 48 kHz for both application profiles. Measured waveform delay is within a few samples of it (307–310).
    #[must_use]
    pub fn lookahead_samples(&self) -> usize {
        self.lookahead_samples
    }

    /// Forgets all history, as if newly created (settings are kept).
    ///
    /// # Errors
    ///
    /// [`AudioError::Codec`] if libopus fails.
    pub fn reset(&mut self) -> Result<(), AudioError> {
        self.inner.reset().map_err(|error| AudioError::from_opus(&error))
    }
}

/// Samples (at 48 kHz) that `packet` decodes to, validating its framing without decoding it.
///
/// # Errors
///
/// [`AudioError::InvalidPacket`] for an empty packet, a malformed table-of-contents or frame
/// count, or a packet longer than 120 ms.
pub fn packet_samples(packet: &[u8]) -> Result<usize, AudioError> {
    packet_samples_at(packet, SAMPLE_RATE_HZ)
}

/// [`packet_samples`] at `rate_hz`.
fn packet_samples_at(packet: &[u8], rate_hz: u32) -> Result<usize, AudioError> {
    if packet.is_empty() {
        return Err(AudioError::InvalidPacket { reason: "empty packet" });
    }
    let max = MAX_PACKET_SAMPLES / (SAMPLE_RATE_HZ / rate_hz) as usize;
    match svc_opus::packet::nb_samples(packet, rate_hz) {
        Ok(0) => Err(AudioError::InvalidPacket { reason: "packet holds no audio" }),
        // libopus already refuses packets over 120 ms; the check keeps our buffer sizing local.
        Ok(samples) if samples <= max => Ok(samples),
        Ok(_) => Err(AudioError::InvalidPacket { reason: "packet longer than 120 ms" }),
        Err(_) => Err(AudioError::InvalidPacket { reason: "malformed table-of-contents or frame count" }),
    }
}

/// Samples per Opus frame inside `packet` (a packet may carry several frames); the unit in which
/// in-band FEC recovers audio.
fn packet_frame_samples(packet: &[u8], rate_hz: u32) -> Result<usize, AudioError> {
    svc_opus::packet::samples_per_frame(packet, rate_hz)
        .map_err(|_| AudioError::InvalidPacket { reason: "malformed table-of-contents" })
}

/// Decodes Opus packets to mono PCM16 (48 kHz unless built [`OpusDecoder::with_rate`]), and
/// hides losses.
///
/// One decoder per received stream. All methods append to the caller's `Vec`, so a consumer can
/// collect a whole stream in one buffer, and leave it as it was when they fail. Sample counts
/// (`conceal`, `decode_fec`) are at the decoder's rate.
pub struct OpusDecoder {
    inner: svc_opus::Decoder,
    rate_hz: u32,
}

impl std::fmt::Debug for OpusDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpusDecoder").finish_non_exhaustive()
    }
}

impl OpusDecoder {
    /// A mono 48 kHz decoder. Stereo packets are accepted and down-mixed by libopus.
    ///
    /// # Errors
    ///
    /// [`AudioError::Codec`] if libopus cannot create the decoder.
    pub fn new() -> Result<Self, AudioError> {
        Self::with_rate(SAMPLE_RATE_HZ)
    }

    /// A mono decoder that outputs `rate_hz` (one of [`OPUS_RATES_HZ`]): libopus decodes to the
    /// rate natively, which is cheaper than decoding at 48 kHz and resampling.
    ///
    /// # Errors
    ///
    /// [`AudioError::UnsupportedRate`] for another rate; [`AudioError::Codec`] if libopus cannot
    /// create the decoder.
    pub fn with_rate(rate_hz: u32) -> Result<Self, AudioError> {
        let rate_hz = check_rate(rate_hz)?;
        let inner = svc_opus::Decoder::new(rate_hz).map_err(|error| AudioError::from_opus(&error))?;
        Ok(Self { inner, rate_hz })
    }

    /// The output rate.
    #[must_use]
    pub fn rate_hz(&self) -> u32 {
        self.rate_hz
    }

    /// Most samples one concealment call fills at this rate (one second).
    fn max_conceal(&self) -> usize {
        self.rate_hz as usize
    }

    /// Decodes `packet`, appending its samples to `out`; returns how many were appended.
    ///
    /// # Errors
    ///
    /// [`AudioError::InvalidPacket`] for a packet that cannot be decoded (including an empty one:
    /// use [`OpusDecoder::conceal`] for a lost packet). `out` is then unchanged and the decoder
    /// stays usable.
    pub fn decode(&mut self, packet: &[u8], out: &mut Vec<i16>) -> Result<usize, AudioError> {
        let samples = packet_samples_at(packet, self.rate_hz)?;
        let start = out.len();
        out.resize(start + samples, 0);
        match self.inner.decode(packet, &mut out[start..], false) {
            Ok(decoded) => {
                out.truncate(start + decoded.min(samples));
                Ok(decoded.min(samples))
            }
            Err(error) => {
                out.truncate(start);
                Err(AudioError::from_opus(&error))
            }
        }
    }

    /// Appends exactly `samples` samples of packet-loss concealment: libopus extrapolates from the
    /// audio decoded so far and fades to silence over about 100 ms.
    ///
    /// Call it with the duration of the lost audio, then decode the next packet as usual.
    ///
    /// # Errors
    ///
    /// [`AudioError::ConcealTooLong`] above one second ([`MAX_CONCEAL_SAMPLES`] at 48 kHz); `out`
    /// is then unchanged.
    pub fn conceal(&mut self, samples: usize, out: &mut Vec<i16>) -> Result<usize, AudioError> {
        if samples > self.max_conceal() {
            return Err(AudioError::ConcealTooLong { requested: samples, max: self.max_conceal() });
        }
        let start = out.len();
        if let Err(error) = self.conceal_unchecked(samples, out) {
            out.truncate(start);
            return Err(error);
        }
        Ok(samples)
    }

    /// Appends exactly `lost_samples` samples for the audio lost just before `next_packet`,
    /// recovering the last lost frame from the in-band FEC data `next_packet` carries and
    /// concealing the rest (or all of it, when `next_packet` has no FEC data or the gap is shorter
    /// than one of its frames).
    ///
    /// Decode `next_packet` itself afterwards with [`OpusDecoder::decode`].
    ///
    /// # Errors
    ///
    /// [`AudioError::InvalidPacket`] if `next_packet` is malformed; [`AudioError::ConcealTooLong`]
    /// above [`MAX_CONCEAL_SAMPLES`]. `out` is then unchanged.
    pub fn decode_fec(
        &mut self,
        next_packet: &[u8],
        lost_samples: usize,
        out: &mut Vec<i16>,
    ) -> Result<usize, AudioError> {
        if lost_samples > self.max_conceal() {
            return Err(AudioError::ConcealTooLong { requested: lost_samples, max: self.max_conceal() });
        }
        packet_samples_at(next_packet, self.rate_hz)?;
        let frame = packet_frame_samples(next_packet, self.rate_hz)?;
        let start = out.len();
        let result = if lost_samples >= frame {
            // libopus would do the same split itself if handed the whole gap, but sizes its
            // scratch on the stack by the gap; splitting keeps every call at one frame at most.
            self.conceal_unchecked(lost_samples - frame, out).and_then(|()| {
                let at = out.len();
                out.resize(at + frame, 0);
                match self.inner.decode(next_packet, &mut out[at..], true) {
                    Ok(_) => Ok(()),
                    Err(error) => Err(AudioError::from_opus(&error)),
                }
            })
        } else {
            // A gap shorter than one frame of the next packet cannot be FEC (which recovers whole
            // frames); conceal it.
            self.conceal_unchecked(lost_samples, out)
        };
        match result {
            Ok(()) => {
                out.truncate(start + lost_samples);
                Ok(lost_samples)
            }
            Err(error) => {
                out.truncate(start);
                Err(error)
            }
        }
    }

    /// Forgets all history, as if newly created: the next packet starts a new stream.
    ///
    /// # Errors
    ///
    /// [`AudioError::Codec`] if libopus fails.
    pub fn reset(&mut self) -> Result<(), AudioError> {
        self.inner.reset().map_err(|error| AudioError::from_opus(&error))
    }

    /// Appends exactly `samples` of concealment, in calls of at most one 20 ms frame each; the
    /// caller has bounded `samples`.
    fn conceal_unchecked(&mut self, samples: usize, out: &mut Vec<i16>) -> Result<(), AudioError> {
        let mut remaining = samples;
        while remaining > 0 {
            // libopus conceals only in whole 2.5 ms steps; the last step may overshoot by less
            // than 2.5 ms, which is cut off. The decoder then runs those few samples ahead of the
            // stream, which is inaudible (the next packet's overlap-add smooths it).
            let step = remaining.min(frame_samples_at(self.rate_hz));
            let conceal_step = CONCEAL_STEP_SAMPLES / (SAMPLE_RATE_HZ / self.rate_hz) as usize;
            let call = step.div_ceil(conceal_step) * conceal_step;
            let at = out.len();
            out.resize(at + call, 0);
            if let Err(error) = self.inner.decode(&[], &mut out[at..], false) {
                return Err(AudioError::from_opus(&error));
            }
            out.truncate(at + step);
            remaining -= step;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
