//! libopus, linked from the system or built from the bundled sources (see `build.rs`), behind
//! a small safe API: exactly the calls svc makes (mono encoders and decoders at any Opus rate,
//! their settings, and packet inspection). `svc-audio` builds its codecs on it.
//!
//! This is the only crate of the workspace that calls C. Every `unsafe` block below is a libopus
//! call whose pointers come from a live state this crate owns or from Rust slices whose lengths
//! are passed alongside, which is libopus's whole contract.

use std::ffi::{c_int, c_void};

/// Whether this build compiled the bundled libopus (`true`) or links the system library.
pub const BUNDLED: bool = cfg!(svc_opus_bundled);

mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    pub const OPUS_OK: c_int = 0;
    pub const OPUS_APPLICATION_VOIP: c_int = 2048;
    pub const OPUS_APPLICATION_AUDIO: c_int = 2049;
    pub const OPUS_SIGNAL_VOICE: c_int = 3001;
    pub const OPUS_SET_BITRATE_REQUEST: c_int = 4002;
    pub const OPUS_SET_COMPLEXITY_REQUEST: c_int = 4010;
    pub const OPUS_SET_INBAND_FEC_REQUEST: c_int = 4012;
    pub const OPUS_SET_PACKET_LOSS_PERC_REQUEST: c_int = 4014;
    pub const OPUS_SET_DTX_REQUEST: c_int = 4016;
    pub const OPUS_SET_SIGNAL_REQUEST: c_int = 4024;
    pub const OPUS_GET_LOOKAHEAD_REQUEST: c_int = 4027;
    pub const OPUS_RESET_STATE: c_int = 4028;

    // Opaque states: only ever handled by pointer.
    pub type OpusEncoder = c_void;
    pub type OpusDecoder = c_void;

    unsafe extern "C" {
        pub fn opus_encoder_create(fs: i32, channels: c_int, application: c_int, error: *mut c_int)
        -> *mut OpusEncoder;
        pub fn opus_encoder_destroy(st: *mut OpusEncoder);
        pub fn opus_encode(
            st: *mut OpusEncoder,
            pcm: *const i16,
            frame_size: c_int,
            data: *mut u8,
            max_data_bytes: i32,
        ) -> i32;
        pub fn opus_encoder_ctl(st: *mut OpusEncoder, request: c_int, ...) -> c_int;
        pub fn opus_decoder_create(fs: i32, channels: c_int, error: *mut c_int) -> *mut OpusDecoder;
        pub fn opus_decoder_destroy(st: *mut OpusDecoder);
        pub fn opus_decode(
            st: *mut OpusDecoder,
            data: *const u8,
            len: i32,
            pcm: *mut i16,
            frame_size: c_int,
            decode_fec: c_int,
        ) -> c_int;
        pub fn opus_decoder_ctl(st: *mut OpusDecoder, request: c_int, ...) -> c_int;
        pub fn opus_packet_get_nb_samples(packet: *const u8, len: i32, fs: i32) -> c_int;
        pub fn opus_packet_get_samples_per_frame(data: *const u8, fs: i32) -> c_int;
        pub fn opus_packet_get_bandwidth(data: *const u8) -> c_int;
        pub fn opus_get_version_string() -> *const c_char;
    }
}

/// A libopus error: the function that failed and its error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error {
    /// The libopus function.
    pub function: &'static str,
    /// The libopus error code (negative).
    pub code: i32,
}

impl Error {
    /// libopus's description of the code (the text of `opus_strerror`).
    #[must_use]
    pub fn description(&self) -> &'static str {
        match self.code {
            -1 => "invalid argument",
            -2 => "buffer too small",
            -3 => "internal error",
            -4 => "corrupted stream",
            -5 => "request not implemented",
            -6 => "invalid state",
            -7 => "memory allocation failed",
            _ => "unknown error",
        }
    }

    /// The packet was malformed (`OPUS_INVALID_PACKET`).
    #[must_use]
    pub fn is_invalid_packet(&self) -> bool {
        self.code == -4
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.function, self.description())
    }
}

impl std::error::Error for Error {}

fn check(function: &'static str, code: c_int) -> Result<usize, Error> {
    usize::try_from(code).map_err(|_| Error { function, code })
}

/// The state a `*_create` call returned, if it reported success; otherwise the state (if any) is
/// destroyed with `destroy` and the error returned.
fn created(
    state: *mut c_void,
    error: c_int,
    function: &'static str,
    destroy: unsafe extern "C" fn(*mut c_void),
) -> Result<std::ptr::NonNull<c_void>, Error> {
    match std::ptr::NonNull::new(state) {
        Some(state) if error == ffi::OPUS_OK => Ok(state),
        Some(state) => {
            // SAFETY: just created by the matching `*_create` and not used again.
            unsafe { destroy(state.as_ptr()) };
            Err(Error { function, code: error })
        }
        // A null state with no error code is an allocation failure.
        None => Err(Error { function, code: if error < 0 { error } else { -7 } }),
    }
}

/// What the encoder is tuned for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Application {
    /// Speech intelligibility first.
    Voip,
    /// Fidelity to the input first.
    Audio,
}

/// The audio bandwidth a packet was coded with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bandwidth {
    /// 4 kHz.
    Narrowband,
    /// 6 kHz.
    Mediumband,
    /// 8 kHz.
    Wideband,
    /// 12 kHz.
    Superwideband,
    /// 20 kHz.
    Fullband,
}

/// The rates libopus codes natively.
fn valid_rate(rate_hz: u32) -> Result<i32, Error> {
    match rate_hz {
        8_000 | 12_000 | 16_000 | 24_000 | 48_000 => i32::try_from(rate_hz).map_err(|_| bad_arg("rate")),
        _ => Err(bad_arg("rate")),
    }
}

fn bad_arg(function: &'static str) -> Error {
    Error { function, code: -1 }
}

fn len_i32(len: usize, function: &'static str) -> Result<i32, Error> {
    i32::try_from(len).map_err(|_| bad_arg(function))
}

/// A mono Opus encoder.
#[derive(Debug)]
pub struct Encoder {
    state: std::ptr::NonNull<c_void>,
}

// SAFETY: an encoder state is plain memory with no thread affinity; `&mut self` on every call
// keeps it to one thread at a time.
unsafe impl Send for Encoder {}

impl Encoder {
    /// A mono encoder for PCM at `rate_hz` (8, 12, 16, 24 or 48 kHz).
    ///
    /// # Errors
    ///
    /// A rate libopus does not code, or libopus failing to create the state.
    pub fn new(rate_hz: u32, application: Application) -> Result<Encoder, Error> {
        let rate = valid_rate(rate_hz)?;
        let application = match application {
            Application::Voip => ffi::OPUS_APPLICATION_VOIP,
            Application::Audio => ffi::OPUS_APPLICATION_AUDIO,
        };
        let mut error: c_int = 0;
        // SAFETY: `error` outlives the call; the returned state is owned by the `Encoder`.
        let state = unsafe { ffi::opus_encoder_create(rate, 1, application, &mut error) };
        created(state, error, "opus_encoder_create", ffi::opus_encoder_destroy).map(|state| Encoder { state })
    }

    fn set(&mut self, request: c_int, value: i32) -> Result<(), Error> {
        // SAFETY: a live state; SET requests take one `opus_int32` by value.
        let code = unsafe { ffi::opus_encoder_ctl(self.state.as_ptr(), request, value) };
        check("opus_encoder_ctl", code).map(drop)
    }

    /// Target bitrate in bit/s.
    ///
    /// # Errors
    ///
    /// A value libopus rejects.
    pub fn set_bitrate(&mut self, bits_per_second: i32) -> Result<(), Error> {
        self.set(ffi::OPUS_SET_BITRATE_REQUEST, bits_per_second)
    }

    /// Complexity, 0 (cheapest) to 10.
    ///
    /// # Errors
    ///
    /// A value out of range.
    pub fn set_complexity(&mut self, complexity: i32) -> Result<(), Error> {
        self.set(ffi::OPUS_SET_COMPLEXITY_REQUEST, complexity)
    }

    /// Tells the encoder the signal is speech.
    ///
    /// # Errors
    ///
    /// libopus refusing (it does not).
    pub fn set_signal_voice(&mut self) -> Result<(), Error> {
        self.set(ffi::OPUS_SET_SIGNAL_REQUEST, ffi::OPUS_SIGNAL_VOICE)
    }

    /// In-band forward error correction on or off.
    ///
    /// # Errors
    ///
    /// libopus refusing (it does not).
    pub fn set_inband_fec(&mut self, enabled: bool) -> Result<(), Error> {
        self.set(ffi::OPUS_SET_INBAND_FEC_REQUEST, i32::from(enabled))
    }

    /// Expected packet loss in percent (0–100), which sizes the FEC.
    ///
    /// # Errors
    ///
    /// A value out of range.
    pub fn set_packet_loss_perc(&mut self, percent: i32) -> Result<(), Error> {
        self.set(ffi::OPUS_SET_PACKET_LOSS_PERC_REQUEST, percent)
    }

    /// Discontinuous transmission on or off.
    ///
    /// # Errors
    ///
    /// libopus refusing (it does not).
    pub fn set_dtx(&mut self, enabled: bool) -> Result<(), Error> {
        self.set(ffi::OPUS_SET_DTX_REQUEST, i32::from(enabled))
    }

    /// Samples (at the input rate) by which decoded audio lags the input.
    ///
    /// # Errors
    ///
    /// libopus refusing (it does not).
    pub fn lookahead(&mut self) -> Result<i32, Error> {
        let mut value: i32 = 0;
        // SAFETY: a live state; GET requests take a pointer to one `opus_int32`, which outlives
        // the call.
        let code =
            unsafe { ffi::opus_encoder_ctl(self.state.as_ptr(), ffi::OPUS_GET_LOOKAHEAD_REQUEST, &raw mut value) };
        check("opus_encoder_ctl", code)?;
        Ok(value)
    }

    /// Encodes one frame (2.5 to 60 ms of samples at the encoder's rate) into `packet`; returns
    /// the packet's length.
    ///
    /// # Errors
    ///
    /// A frame length libopus does not code, or a `packet` buffer too small.
    pub fn encode(&mut self, pcm: &[i16], packet: &mut [u8]) -> Result<usize, Error> {
        let frame = len_i32(pcm.len(), "opus_encode")?;
        let capacity = len_i32(packet.len(), "opus_encode")?;
        // SAFETY: a live state; `pcm` holds `frame` samples of one channel and `packet` has room
        // for `capacity` bytes.
        let written =
            unsafe { ffi::opus_encode(self.state.as_ptr(), pcm.as_ptr(), frame, packet.as_mut_ptr(), capacity) };
        check("opus_encode", written)
    }

    /// Forgets all history (settings are kept).
    ///
    /// # Errors
    ///
    /// libopus refusing (it does not).
    pub fn reset(&mut self) -> Result<(), Error> {
        // SAFETY: a live state; OPUS_RESET_STATE takes no argument.
        let code = unsafe { ffi::opus_encoder_ctl(self.state.as_ptr(), ffi::OPUS_RESET_STATE) };
        check("opus_encoder_ctl", code).map(drop)
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: created by `opus_encoder_create` and destroyed exactly once, here.
        unsafe { ffi::opus_encoder_destroy(self.state.as_ptr()) }
    }
}

/// A mono Opus decoder (stereo packets are down-mixed).
#[derive(Debug)]
pub struct Decoder {
    state: std::ptr::NonNull<c_void>,
}

// SAFETY: as for `Encoder`.
unsafe impl Send for Decoder {}

impl Decoder {
    /// A mono decoder that outputs `rate_hz` (8, 12, 16, 24 or 48 kHz).
    ///
    /// # Errors
    ///
    /// A rate libopus does not output, or libopus failing to create the state.
    pub fn new(rate_hz: u32) -> Result<Decoder, Error> {
        let rate = valid_rate(rate_hz)?;
        let mut error: c_int = 0;
        // SAFETY: `error` outlives the call; the returned state is owned by the `Decoder`.
        let state = unsafe { ffi::opus_decoder_create(rate, 1, &mut error) };
        created(state, error, "opus_decoder_create", ffi::opus_decoder_destroy).map(|state| Decoder { state })
    }

    /// Decodes `packet` into `out` (at most `out.len()` samples); an empty `packet` conceals one
    /// lost packet of `out.len()` samples. With `fec`, decodes the FEC copy of the packet
    /// *before* `packet` instead. Returns the samples written.
    ///
    /// # Errors
    ///
    /// A malformed packet ([`Error::is_invalid_packet`]) or an `out` too small for it.
    pub fn decode(&mut self, packet: &[u8], out: &mut [i16], fec: bool) -> Result<usize, Error> {
        let len = len_i32(packet.len(), "opus_decode")?;
        let frame = len_i32(out.len(), "opus_decode")?;
        let data = if packet.is_empty() { std::ptr::null() } else { packet.as_ptr() };
        // SAFETY: a live state; `data` is null (loss) or points at `len` bytes; `out` has room
        // for `frame` samples of one channel.
        let decoded =
            unsafe { ffi::opus_decode(self.state.as_ptr(), data, len, out.as_mut_ptr(), frame, c_int::from(fec)) };
        check("opus_decode", decoded)
    }

    /// Forgets all history.
    ///
    /// # Errors
    ///
    /// libopus refusing (it does not).
    pub fn reset(&mut self) -> Result<(), Error> {
        // SAFETY: a live state; OPUS_RESET_STATE takes no argument.
        let code = unsafe { ffi::opus_decoder_ctl(self.state.as_ptr(), ffi::OPUS_RESET_STATE) };
        check("opus_decoder_ctl", code).map(drop)
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        // SAFETY: created by `opus_decoder_create` and destroyed exactly once, here.
        unsafe { ffi::opus_decoder_destroy(self.state.as_ptr()) }
    }
}

/// Reading packets without decoding them.
pub mod packet {
    use super::{Bandwidth, Error, ffi, len_i32, valid_rate};

    /// Samples `packet` decodes to at `rate_hz`.
    ///
    /// # Errors
    ///
    /// An empty or malformed packet, or a rate libopus does not output.
    pub fn nb_samples(packet: &[u8], rate_hz: u32) -> Result<usize, Error> {
        let rate = valid_rate(rate_hz)?;
        if packet.is_empty() {
            return Err(Error { function: "opus_packet_get_nb_samples", code: -1 });
        }
        let len = len_i32(packet.len(), "opus_packet_get_nb_samples")?;
        // SAFETY: `packet` holds `len` bytes.
        let samples = unsafe { ffi::opus_packet_get_nb_samples(packet.as_ptr(), len, rate) };
        super::check("opus_packet_get_nb_samples", samples)
    }

    /// Samples per Opus frame in `packet` (from its first byte) at `rate_hz`.
    ///
    /// # Errors
    ///
    /// An empty packet, or a rate libopus does not output.
    pub fn samples_per_frame(packet: &[u8], rate_hz: u32) -> Result<usize, Error> {
        let rate = valid_rate(rate_hz)?;
        if packet.is_empty() {
            return Err(Error { function: "opus_packet_get_samples_per_frame", code: -1 });
        }
        // SAFETY: `packet` holds at least the one byte libopus reads.
        let samples = unsafe { ffi::opus_packet_get_samples_per_frame(packet.as_ptr(), rate) };
        super::check("opus_packet_get_samples_per_frame", samples)
    }

    /// The bandwidth `packet` was coded with.
    ///
    /// # Errors
    ///
    /// An empty packet.
    pub fn bandwidth(packet: &[u8]) -> Result<Bandwidth, Error> {
        if packet.is_empty() {
            return Err(Error { function: "opus_packet_get_bandwidth", code: -1 });
        }
        // SAFETY: `packet` holds at least the one byte libopus reads.
        let code = unsafe { ffi::opus_packet_get_bandwidth(packet.as_ptr()) };
        match code {
            1101 => Ok(Bandwidth::Narrowband),
            1102 => Ok(Bandwidth::Mediumband),
            1103 => Ok(Bandwidth::Wideband),
            1104 => Ok(Bandwidth::Superwideband),
            1105 => Ok(Bandwidth::Fullband),
            code => Err(Error { function: "opus_packet_get_bandwidth", code: code.min(-4) }),
        }
    }
}

/// The linked libopus's version string (`libopus 1.3.1`, or `libopus 1.3-svc-bundled`).
#[must_use]
pub fn version() -> String {
    // SAFETY: libopus returns a pointer to a static NUL-terminated string.
    let text = unsafe { std::ffi::CStr::from_ptr(ffi::opus_get_version_string()) };
    text.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(rate: u32, samples: usize) -> Vec<i16> {
        (0..samples)
            .map(|n| ((n as f64 * 2.0 * std::f64::consts::PI * 440.0 / f64::from(rate)).sin() * 8_000.0) as i16)
            .collect()
    }

    #[test]
    fn a_frame_round_trips_at_every_rate() {
        for rate in [8_000, 12_000, 16_000, 24_000, 48_000] {
            let frame = rate as usize / 50;
            let mut encoder = Encoder::new(rate, Application::Audio).expect("encoder");
            encoder.set_bitrate(40_000).expect("bitrate");
            encoder.set_complexity(1).expect("complexity");
            encoder.set_signal_voice().expect("signal");
            encoder.set_inband_fec(true).expect("fec");
            encoder.set_packet_loss_perc(10).expect("loss");
            encoder.set_dtx(false).expect("dtx");
            assert!(encoder.lookahead().expect("lookahead") > 0);
            let mut packet = vec![0u8; 1500];
            let mut decoder = Decoder::new(rate).expect("decoder");
            let mut out = vec![0i16; frame];
            let source = tone(rate, frame * 10);
            for chunk in source.chunks_exact(frame) {
                let len = encoder.encode(chunk, &mut packet).expect("encode");
                assert_eq!(packet::nb_samples(&packet[..len], rate), Ok(frame));
                assert_eq!(packet::samples_per_frame(&packet[..len], rate), Ok(frame));
                assert!(packet::bandwidth(&packet[..len]).is_ok());
                assert_eq!(decoder.decode(&packet[..len], &mut out, false), Ok(frame));
            }
            assert!(out.iter().any(|&s| s.abs() > 1_000), "the tone comes back at {rate} Hz");
            assert_eq!(decoder.decode(&[], &mut out, false), Ok(frame), "a loss is concealed");
            encoder.reset().expect("reset");
            decoder.reset().expect("reset");
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_crash() {
        assert_eq!(Encoder::new(44_100, Application::Voip).map(drop), Err(bad_arg("rate")));
        assert!(Decoder::new(0).is_err());
        let mut encoder = Encoder::new(48_000, Application::Voip).expect("encoder");
        let mut packet = vec![0u8; 1500];
        assert!(encoder.encode(&[0; 100], &mut packet).is_err(), "not a frame length");
        assert!(encoder.set_complexity(11).is_err());
        let mut decoder = Decoder::new(48_000).expect("decoder");
        let mut out = vec![0i16; 960];
        let garbage = [0xFFu8, 0xFF, 0xFF, 0xFF, 0x00];
        let error = decoder.decode(&garbage, &mut out, false).expect_err("garbage");
        assert!(error.is_invalid_packet(), "{error}");
        assert!(packet::nb_samples(&[], 48_000).is_err());
        assert!(packet::nb_samples(&garbage, 48_000).is_err());
    }

    #[test]
    fn the_build_links_what_it_was_asked_for() {
        // CI builds once with SVC_OPUS_BUNDLED=1 and runs this: the fallback really is used.
        if std::env::var("SVC_OPUS_BUNDLED").is_ok_and(|value| value == "1") {
            assert!(std::hint::black_box(BUNDLED), "the bundled library is linked");
            assert!(version().contains("svc-bundled"), "{}", version());
        }
        assert!(version().starts_with("libopus "), "{}", version());
    }
}
