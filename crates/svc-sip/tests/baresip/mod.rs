//! A real SIP peer for end-to-end tests: baresip (Debian's `baresip` package), auto-answering on
//! loopback with a 440 Hz tone as its microphone and no sound device.
//!
//! How it is configured (what the integrator's end-to-end test needs):
//! - a fresh config directory passed with `-f DIR`, holding two files;
//! - `DIR/config`: `sip_listen 127.0.0.1:PORT` and `net_interface 127.0.0.1` (signalling and the
//!   address in its SDP both on loopback), `module_path
//!   /usr/lib/baresip/modules`, modules `g711.so` (PCMU/PCMA), `ausine.so` (tone source),
//!   `aufile.so`, `account.so` (reads `accounts`), `menu.so` (carries out `answermode=auto` in
//!   baresip 1.0), `audio_source ausine,440` with `ausrc_srate 48000` and
//!   `ausrc_channels 2` (ausine only makes 48 kHz stereo; baresip resamples to 8 kHz mono for
//!   G.711; the same two lines for `auplay_`), `audio_player`/`audio_alert` pointed at a file
//!   module so no sound device is opened, and an `rtp_ports` range;
//! - `DIR/accounts`: one line, `<sip:NUMBER@127.0.0.1:PORT>;regint=0;answermode=auto`
//!   (`regint=0`: no REGISTER; the AOR's user is the number we dial).
//!
//! Run as `baresip -f DIR` with stdin closed; it is killed (by its pid) when dropped.
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

/// The `config` file for a baresip listening on `port`, writing what it hears under `dir`.
pub fn config_file(port: u16, dir: &std::path::Path) -> String {
    let heard = dir.join("heard.wav");
    let base = 40_000 + (port % 1000) * 20;
    format!(
        "poll_method\t\tepoll\n\
         sip_listen\t\t127.0.0.1:{port}\n\
         net_interface\t\t127.0.0.1\n\
         module_path\t\t/usr/lib/baresip/modules\n\
         module\t\t\tg711.so\n\
         module\t\t\tausine.so\n\
         module\t\t\taufile.so\n\
         module\t\t\taccount.so\n\
         module\t\t\tmenu.so\n\
         audio_source\t\tausine,440\n\
         ausrc_srate\t\t48000\n\
         auplay_srate\t\t48000\n\
         ausrc_channels\t\t2\n\
         auplay_channels\t\t2\n\
         audio_player\t\taufile,{}\n\
         audio_alert\t\taufile,{}\n\
         rtp_ports\t\t{base}-{}\n",
        heard.display(),
        heard.display(),
        base + 19
    )
}

/// The `accounts` file: one auto-answering account for `number`, no registration.
pub fn accounts_file(number: &str, port: u16) -> String {
    format!("<sip:{number}@127.0.0.1:{port}>;regint=0;answermode=auto\n")
}

impl Baresip {
    /// Starts baresip on a free loopback port, answering calls to `number`. `None` when the
    /// binary is not installed.
    pub fn start(number: &str) -> Option<Baresip> {
        if !std::path::Path::new("/usr/bin/baresip").exists() {
            return None;
        }
        let port = std::net::UdpSocket::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let dir = std::env::temp_dir().join(format!("svc-sip-baresip-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(dir.join("config"), config_file(port, &dir)).ok()?;
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
}

impl Drop for Baresip {
    fn drop(&mut self) {
        // Best effort: the process may have exited on its own.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
