//! baresip as the phone for svc-phone's end-to-end test; adapted from svc-sip's
//! `tests/baresip/mod.rs` (same loopback, no-registration, auto-answer account), with a WAV
//! file as its microphone and another as its speaker:
//!
//! - `audio_source aufile,DIR/say.wav`: baresip 1.0's aufile source reads a 16-bit PCM WAV
//!   whose rate and channels match `ausrc_srate`/`ausrc_channels` (48000, 2 here: the file is
//!   written so). When the file runs out, aufile reports "end of file" to baresip's audio error
//!   handler, which closes the call: baresip sends BYE. That is the test's phone-side hangup.
//! - What it hears: baresip 1.0's aufile has no player (that came later; `audio_player aufile,…`
//!   only keeps it off the sound devices, and its playback fails harmlessly). The `sndfile`
//!   audio filter records instead: with `snd_path DIR` it writes every call's decoded audio to
//!   `DIR/dump-<peer>-dec.wav` (and what it sends to `…-enc.wav`) at the codec's rate (8 kHz
//!   mono for G.711), finalised when the call ends.
//! - modules `g711` (PCMU/PCMA), `aufile`, `sndfile`, `account` (reads `accounts`), `menu`
//!   (carries out `answermode=auto`); `sip_listen`/`net_interface` on 127.0.0.1; an
//!   `rtp_ports` range.
//!
//! Run as `baresip -f DIR` with stdin closed; killed (by its pid) when dropped.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A running baresip.
pub struct Baresip {
    child: Child,
    pub dir: PathBuf,
    /// Where it takes SIP over UDP.
    pub addr: SocketAddr,
    /// The number its account answers.
    pub number: String,
}

/// The `config` file for a baresip listening on `port`, saying `say` and recording into `heard`.
pub fn config_file(port: u16, say: &std::path::Path, heard: &std::path::Path) -> String {
    let base = 42_000 + (port % 1000) * 20;
    format!(
        "poll_method\t\tepoll\n\
         sip_listen\t\t127.0.0.1:{port}\n\
         net_interface\t\t127.0.0.1\n\
         module_path\t\t/usr/lib/baresip/modules\n\
         module\t\t\tg711.so\n\
         module\t\t\taufile.so\n\
         module\t\t\tsndfile.so\n\
         snd_path\t\t{}\n\
         module\t\t\taccount.so\n\
         module\t\t\tmenu.so\n\
         audio_source\t\taufile,{}\n\
         ausrc_srate\t\t48000\n\
         auplay_srate\t\t48000\n\
         ausrc_channels\t\t2\n\
         auplay_channels\t\t2\n\
         audio_player\t\taufile,{}\n\
         audio_alert\t\taufile,{}\n\
         rtp_ports\t\t{base}-{}\n",
        heard.parent().unwrap_or(heard).display(),
        say.display(),
        heard.display(),
        heard.with_extension("alert.wav").display(),
        base + 19
    )
}

/// The `accounts` file: one auto-answering account for `number`, no registration.
pub fn accounts_file(number: &str, port: u16) -> String {
    format!("<sip:{number}@127.0.0.1:{port}>;regint=0;answermode=auto\n")
}

impl Baresip {
    /// Starts baresip on a free loopback port, answering calls to `number` and saying
    /// `say` (48 kHz mono; written as the stereo file baresip reads). `None` when the binary is
    /// not installed.
    pub fn start(number: &str, say: &[i16]) -> Option<Baresip> {
        if !std::path::Path::new("/usr/bin/baresip").exists() {
            return None;
        }
        let port = std::net::UdpSocket::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let dir = std::env::temp_dir().join(format!("svc-phone-baresip-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let stereo: Vec<i16> = say.iter().flat_map(|&s| [s, s]).collect();
        svc_audio::wav::write_wav_file(dir.join("say.wav"), 48_000, 2, &stereo).ok()?;
        std::fs::write(dir.join("config"), config_file(port, &dir.join("say.wav"), &dir.join("heard.wav"))).ok()?;
        std::fs::write(dir.join("accounts"), accounts_file(number, port)).ok()?;
        let log = std::fs::File::create(dir.join("baresip.log")).ok()?;
        let child = Command::new("/usr/bin/baresip")
            .arg("-f")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().ok()?)
            .stderr(log)
            .spawn()
            .ok()?;
        // baresip binds its socket within a few ms; give it a moment before the first INVITE.
        std::thread::sleep(std::time::Duration::from_millis(500));
        Some(Baresip { child, dir, addr: SocketAddr::from(([127, 0, 0, 1], port)), number: number.to_owned() })
    }

    /// Its output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("baresip.log")).unwrap_or_default()
    }

    /// What it heard: `(sample rate, mono samples)` of the `sndfile` dump of the decoded
    /// stream; empty when there is none (yet: it is complete once the call has ended).
    pub fn heard(&self) -> (u32, Vec<i16>) {
        let dump = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .find(|path| path.to_string_lossy().ends_with("-dec.wav"));
        match dump.map(svc_audio::wav::read_wav_file) {
            Some(Ok(wav)) => (wav.sample_rate, wav.to_mono()),
            _ => (0, Vec::new()),
        }
    }
}

impl Drop for Baresip {
    fn drop(&mut self) {
        // Best effort: the process may have exited on its own.
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("KEEP_BARESIP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
