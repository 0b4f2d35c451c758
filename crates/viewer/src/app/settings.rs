//! Saved settings of the viewer: recently opened studies and the overlay opacity.
//!
//! Kept apart from runtime state, as plain serde data in one JSON file
//! (`$KEYSLICE_CONFIG_DIR`, else `$XDG_CONFIG_HOME/keyslice`, else `~/.config/keyslice`, or
//! `%APPDATA%\keyslice` on Windows). Written to a temporary file and renamed into place, so a
//! crash mid-write leaves the previous file whole. A damaged file is never fatal: the viewer
//! starts with defaults and says so. Only local paths are stored; nothing leaves the machine.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How many recent studies are remembered.
pub const RECENT_LIMIT: usize = 10;

/// The saved settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Most recently opened first; no duplicates.
    pub recent: Vec<PathBuf>,
    /// Mask overlay opacity, 0–1.
    pub mask_opacity: f32,
    /// The window's inner size in points (width, height) when it was last closed or resized.
    pub window_size: Option<[f32; 2]>,
    /// The window's position on screen (x, y) when the platform told it.
    pub window_position: Option<[f32; 2]>,
    /// The side panels' widths in points (left, right) as the reviewer last left them.
    pub panel_widths: Option<[f32; 2]>,
    /// Who reviews in this window (`keyslice view --reviewer NAME` sets it once): the name
    /// shown beside Accept and written into the review log.
    pub reviewer: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            recent: Vec::new(),
            mask_opacity: 0.5,
            window_size: None,
            window_position: None,
            panel_widths: None,
            reviewer: None,
        }
    }
}

/// Why settings could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file exists but could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The settings file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is not valid settings JSON.
    #[error(
        "{path}: not valid settings ({source}); defaults are used and it is replaced on the next save"
    )]
    Parse {
        /// The settings file.
        path: PathBuf,
        /// What the parser said.
        source: serde_json::Error,
    },
}

impl Settings {
    /// Puts `path` first in the recent list (made absolute when possible), dropping an older
    /// entry for the same study and anything beyond [`RECENT_LIMIT`].
    pub fn remember(&mut self, path: &Path) {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        self.recent.retain(|known| known != &path);
        self.recent.insert(0, path);
        self.recent.truncate(RECENT_LIMIT);
    }

    /// Reads the settings file; a missing file gives defaults.
    pub fn load(path: &Path) -> Result<Self, SettingsError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self::default());
            }
            Err(source) => {
                return Err(SettingsError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let mut settings: Self =
            serde_json::from_str(&text).map_err(|source| SettingsError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        settings.mask_opacity = if settings.mask_opacity.is_finite() {
            settings.mask_opacity.clamp(0.0, 1.0)
        } else {
            Self::default().mask_opacity
        };
        settings.recent.truncate(RECENT_LIMIT);
        Ok(settings)
    }

    /// Writes the settings file atomically (temporary file, flush, rename).
    pub fn save(&self, path: &Path) -> Result<(), SettingsError> {
        let io_error = |source| SettingsError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).map_err(io_error)?;
        }
        let temporary = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|source| SettingsError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        let mut file = std::fs::File::create(&temporary).map_err(io_error)?;
        file.write_all(text.as_bytes()).map_err(io_error)?;
        file.sync_all().map_err(io_error)?;
        drop(file);
        std::fs::rename(&temporary, path).map_err(io_error)
    }
}

/// The window's settings with their file: changes are marked and written once they settle
/// (an opacity drag changes the value every frame), and at exit.
pub struct SettingsFile {
    /// The settings in use.
    pub settings: Settings,
    path: Option<PathBuf>,
    changed: Option<Instant>,
}

impl SettingsFile {
    /// Reads the settings from [`settings_path`]; an unreadable file gives defaults and the
    /// notice to show.
    #[must_use]
    pub fn load() -> (Self, Option<String>) {
        Self::load_from(settings_path())
    }

    /// Settings that are never read or written (a window under test).
    #[must_use]
    pub fn in_memory() -> Self {
        Self::load_from(None).0
    }

    /// Reads the settings from `path` (none: defaults, never written).
    #[must_use]
    pub fn load_from(path: Option<PathBuf>) -> (Self, Option<String>) {
        let (settings, notice) = match path.as_deref().map(Settings::load) {
            Some(Ok(settings)) => (settings, None),
            Some(Err(error)) => {
                tracing::warn!(%error, "settings not read");
                (
                    Settings::default(),
                    Some(format!("settings not read: {error}")),
                )
            }
            None => (Settings::default(), None),
        };
        let file = Self {
            settings,
            path,
            changed: None,
        };
        (file, notice)
    }

    /// Marks the settings changed; [`Self::save_when_settled`] writes them.
    pub fn mark_changed(&mut self) {
        self.changed.get_or_insert_with(Instant::now);
    }

    /// Whether a change is not yet written.
    #[must_use]
    pub fn unsaved(&self) -> bool {
        self.changed.is_some()
    }

    /// Writes the settings now; a failure gives the notice to show, never an error.
    pub fn save(&mut self) -> Option<String> {
        self.changed = None;
        let path = self.path.as_ref()?;
        let error = self.settings.save(path).err()?;
        tracing::warn!(%error, "settings not saved");
        Some(format!("settings not saved: {error}"))
    }

    /// Writes a change once nothing has changed for a second; until then asks for a frame
    /// later to look again.
    pub fn save_when_settled(&mut self, ctx: &egui::Context) -> Option<String> {
        let since = self.changed?;
        if since.elapsed() > Duration::from_secs(1) {
            self.save()
        } else {
            ctx.request_repaint_after(Duration::from_millis(300));
            None
        }
    }
}

/// Where the settings file lives, or `None` when no home or config folder is known.
#[must_use]
pub fn settings_path() -> Option<PathBuf> {
    let from_env = env_folder;
    let folder = if let Some(folder) = from_env("KEYSLICE_CONFIG_DIR") {
        folder
    } else if cfg!(windows) {
        from_env("APPDATA")?.join("keyslice")
    } else if let Some(config) = from_env("XDG_CONFIG_HOME") {
        config.join("keyslice")
    } else {
        from_env("HOME")?.join(".config").join("keyslice")
    };
    Some(folder.join("settings.json"))
}

/// The folder named by environment variable `name`, when it is set and not empty.
#[must_use]
pub fn env_folder(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_the_file() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("nested").join("settings.json");
        let mut settings = Settings::default();
        settings.remember(Path::new("/data/case1/ct.nii.gz"));
        settings.remember(Path::new("/data/case2"));
        settings.mask_opacity = 0.3;
        settings.save(&path).unwrap();
        let loaded = Settings::load(&path).unwrap();
        assert_eq!(loaded, settings);
        assert_eq!(loaded.recent[0], PathBuf::from("/data/case2"));
        assert!(!path.with_extension("json.tmp").exists());
    }

    #[test]
    fn remembering_again_moves_a_study_to_the_top_and_the_list_stays_bounded() {
        let mut settings = Settings::default();
        for n in 0..15 {
            settings.remember(Path::new(&format!("/data/case{n}")));
        }
        settings.remember(Path::new("/data/case10"));
        assert_eq!(settings.recent.len(), RECENT_LIMIT);
        assert_eq!(settings.recent[0], PathBuf::from("/data/case10"));
        assert_eq!(settings.recent[1], PathBuf::from("/data/case14"));
        assert_eq!(
            settings
                .recent
                .iter()
                .filter(|path| path.ends_with("case10"))
                .count(),
            1
        );
    }

    #[test]
    fn a_missing_file_gives_defaults_and_a_damaged_one_names_the_file() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("settings.json");
        assert_eq!(Settings::load(&path).unwrap(), Settings::default());
        std::fs::write(&path, "{\"recent\": [\"/a\"], \"mask_opac").unwrap();
        let error = Settings::load(&path).unwrap_err().to_string();
        assert!(error.contains("settings.json"), "{error}");
        assert!(error.contains("defaults are used"), "{error}");
    }

    #[test]
    fn out_of_range_opacity_is_clamped() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("settings.json");
        std::fs::write(&path, r#"{"mask_opacity": 7.5}"#).unwrap();
        let settings = Settings::load(&path).unwrap();
        assert!((settings.mask_opacity - 1.0).abs() < f32::EPSILON);
        assert!(settings.recent.is_empty());
    }
}
