//! Clock faults for one master via libfaketime: the master runs with libfaketime preloaded
//! and reads its time offset from a file, so the harness can make that master's wall clock
//! jump while it runs (keys then expire early or late). Skipped cleanly when libfaketime is
//! not installed.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::error::HarnessError;

/// File name of the preload library.
const LIBRARY: &str = "libfaketime.so.1";

/// Finds libfaketime's preload library: `$QUORLOCK_LIBFAKETIME` if set, else the usual
/// install locations (`/usr/lib/<multiarch>/faketime`, `/usr/lib/faketime`,
/// `/usr/local/lib/faketime`, `/opt/homebrew/lib/faketime`).
pub fn libfaketime_path() -> Result<PathBuf, HarnessError> {
    if let Some(path) = std::env::var_os("QUORLOCK_LIBFAKETIME") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(HarnessError::FaketimeMissing {
                searched: path.display().to_string(),
            })
        };
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(entries) = fs::read_dir("/usr/lib") {
        let mut multiarch: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path().join("faketime").join(LIBRARY))
            .collect();
        multiarch.sort();
        candidates.extend(multiarch);
    }
    for dir in [
        "/usr/lib/faketime",
        "/usr/local/lib/faketime",
        "/opt/homebrew/lib/faketime",
    ] {
        candidates.push(Path::new(dir).join(LIBRARY));
    }
    match candidates.iter().find(|p| p.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(HarnessError::FaketimeMissing {
            searched: format!(
                "/usr/lib/*/faketime/{LIBRARY}, /usr/lib/faketime, /usr/local/lib/faketime, /opt/homebrew/lib/faketime"
            ),
        }),
    }
}

/// A controllable wall-clock offset for processes started with [`FakeClock::env`].
///
/// The offset lives in a file that libfaketime re-reads on every clock call, so changes
/// apply immediately to a running process. The monotonic clock is left alone.
#[derive(Debug)]
pub struct FakeClock {
    library: PathBuf,
    dir: PathBuf,
    file: PathBuf,
}

impl FakeClock {
    /// Creates a clock with offset zero, in its own temp dir (removed on drop).
    pub fn new() -> Result<FakeClock, HarnessError> {
        let library = libfaketime_path()?;
        let dir = std::env::temp_dir().join(format!(
            "quorlock-faketime-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        fs::create_dir_all(&dir).map_err(|e| HarnessError::io(format!("creating {}", dir.display()), e))?;
        let clock = FakeClock {
            library,
            file: dir.join("offset"),
            dir,
        };
        clock.set_offset_secs(0)?;
        Ok(clock)
    }

    /// The environment that makes a process follow this clock.
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("LD_PRELOAD".into(), self.library.clone().into()),
            ("FAKETIME_TIMESTAMP_FILE".into(), self.file.clone().into()),
            ("FAKETIME_NO_CACHE".into(), "1".into()),
            ("DONT_FAKE_MONOTONIC".into(), "1".into()),
        ]
    }

    /// Sets the offset from real time, in seconds (negative: the past). Atomic for readers.
    pub fn set_offset_secs(&self, offset: i64) -> Result<(), HarnessError> {
        let tmp = self.dir.join("offset.tmp");
        let spec = if offset >= 0 {
            format!("+{offset}\n")
        } else {
            format!("{offset}\n")
        };
        fs::write(&tmp, spec).map_err(|e| HarnessError::io(format!("writing {}", tmp.display()), e))?;
        fs::rename(&tmp, &self.file)
            .map_err(|e| HarnessError::io(format!("replacing {}", self.file.display()), e))
    }

    /// The offset file.
    pub fn file(&self) -> &Path {
        &self.file
    }
}

/// Checks that `program --version` runs under `clock`. Some builds cannot: libfaketime
/// deadlocks with jemalloc (which Debian's redis-server uses), printing a "libfaketime:"
/// complaint and hanging; that is detected from stderr or by a bounded wait.
pub async fn probe(program: &Path, clock: &FakeClock) -> Result<(), HarnessError> {
    let incompatible = |reason: String| HarnessError::FaketimeIncompatible {
        program: program.display().to_string(),
        reason,
    };
    let mut child = Command::new(program)
        .arg("--version")
        .envs(clock.env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| HarnessError::io(format!("running {} --version", program.display()), e))?;
    let stderr = child.stderr.take();
    let complaint = async {
        if let Some(stderr) = stderr {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("libfaketime") {
                    return Some(line);
                }
            }
        }
        None
    };
    let outcome = tokio::time::timeout(Duration::from_secs(5), async {
        tokio::select! {
            Some(line) = complaint => Err(line),
            status = child.wait() => Ok(status),
        }
    })
    .await;
    match outcome {
        Ok(Ok(Ok(status))) if status.success() => Ok(()),
        Ok(Ok(Ok(status))) => Err(incompatible(format!("it exited with {status}"))),
        Ok(Ok(Err(e))) => Err(HarnessError::io(format!("waiting for {}", program.display()), e)),
        Ok(Err(line)) => Err(incompatible(line)),
        Err(_) => Err(incompatible("it hung for 5 s".into())),
    }
}

impl Drop for FakeClock {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_missing_library_error_says_what_was_searched_and_how_to_install() {
        let err = HarnessError::FaketimeMissing {
            searched: "/x/libfaketime.so.1".into(),
        }
        .to_string();
        assert!(err.contains("/x/libfaketime.so.1"), "{err}");
        assert!(err.contains("apt-get install libfaketime"), "{err}");
    }

    #[test]
    fn offsets_are_written_as_faketime_specs() {
        let Ok(clock) = FakeClock::new() else {
            eprintln!("libfaketime not installed; skipping");
            return;
        };
        clock.set_offset_secs(90).unwrap();
        assert_eq!(fs::read_to_string(clock.file()).unwrap(), "+90\n");
        clock.set_offset_secs(-5).unwrap();
        assert_eq!(fs::read_to_string(clock.file()).unwrap(), "-5\n");
        let env = clock.env();
        assert!(env.iter().any(|(k, _)| k == "LD_PRELOAD"));
    }
}
