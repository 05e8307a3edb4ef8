//! The standalone state store: connector configs, target states and pending
//! restart requests in one JSON file, replaced atomically on every change, so
//! that a host restart brings every connector back as it was.

use super::StoredState;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct FileStore {
    path: PathBuf,
}

impl FileStore {
    pub fn new(path: &Path) -> Self {
        FileStore { path: path.to_path_buf() }
    }

    pub fn load(&self) -> Result<StoredState> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", self.path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StoredState::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", self.path.display())),
        }
    }

    /// Write, sync, rename, sync the directory: after this returns the new
    /// state survives a crash, and a crash during it leaves the old one.
    pub fn save(&self, state: &StoredState) -> Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = self.path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(state)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{RestartRequest, StoredConnector};
    use super::*;
    use crate::herder::types::TargetState;

    #[test]
    fn state_survives_a_round_trip_and_a_missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::new(&dir.path().join("state.json"));
        assert_eq!(store.load().unwrap(), StoredState::default());
        let mut state = StoredState::default();
        state.connectors.insert(
            "c".into(),
            StoredConnector { config: [("k".to_string(), "v".to_string())].into(), target_state: TargetState::Paused },
        );
        state.restart_requests.insert("c".into(), RestartRequest { include_tasks: true, only_failed: false });
        store.save(&state).unwrap();
        assert_eq!(store.load().unwrap(), state);
        assert!(!dir.path().join("state.json.tmp").exists());
    }
}
